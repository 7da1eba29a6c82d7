package io.queen.embedded.internal.log;

import io.queen.PushOutcomeUnknownException;
import io.queen.PushResult;
import io.queen.QueenDatabaseException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

/**
 * Pushes into one partition from several threads of this node, combined into one transaction while the partition is
 * busy.
 *
 * <p>A push holds its partition's row lock from taking the offsets until its commit is flushed: that is what makes
 * offsets commit-ordered, and it makes pushes into one partition go one at a time, each through its own WAL flush.
 * Here a push into a partition this node is already pushing into waits in the JVM instead of on the row lock (without
 * a connection), and when the push in flight is done, one of the waiting threads pushes every waiting push's items in
 * one transaction: one lock, one flush for all of them. A push that finds its partition idle goes at once, so nothing
 * waits that would not have waited on the lock anyway.
 *
 * <p>Each call keeps what it had alone: its items stored all or none, contiguous and in its order, the ids and
 * transaction ids made for it, its own results. A combined transaction that cannot go the common way (a bounded queue,
 * a payload that must be sealed, any error that is not a lost database) stores nothing; then each call pushes alone, as
 * it would have. A transient failure that outlasts the retries is every call's failure; a combined push whose outcome
 * is unknown throws {@link PushOutcomeUnknownException} to each call with its own items.
 */
final class PartitionLanes {
  /** Most items one combined push carries (a call with more goes alone). */
  static final int MAX_ITEMS = 1_000;

  private static final Object ALONE = new Object();

  private final ConcurrentHashMap<String, Lane> lanes = new ConcurrentHashMap<>();
  private final Metrics metrics;

  PartitionLanes(Metrics metrics) {
    this.metrics = metrics;
  }

  /** A call waiting for its items to be pushed: its outcome is a result list, an exception, or {@link #ALONE}. */
  private static final class Call {
    final PushBatch prepared;
    /** Set by the thread that pushed the call (a waiter may look before that thread takes the lane's lock). */
    volatile Object outcome;

    Call(PushBatch prepared) {
      this.prepared = prepared;
    }
  }

  private static final class Lane {
    final ReentrantLock lock = new ReentrantLock();
    final Condition changed = lock.newCondition();
    final ArrayDeque<Call> waiting = new ArrayDeque<>();
    boolean busy;
  }

  /**
   * Pushes {@code p} (items of one partition, generated transaction ids) with whatever other calls into the same
   * partition are waiting.
   *
   * @param combined pushes a batch of several calls' items through the common path only; returns {@code null}, having
   *     stored nothing, when the batch would need the full push
   * @param alone pushes one call's items the usual way
   */
  List<PushResult> push(PushBatch p, Function<PushBatch, List<PushResult>> combined,
      Function<PushBatch, List<PushResult>> alone) {
    String key = p.queues()[0] + '\u0000' + p.partitions()[0];
    Lane lane = lanes.computeIfAbsent(key, k -> new Lane());
    Call me = new Call(p);
    lane.lock.lock();
    try {
      lane.waiting.add(me);
      while (me.outcome == null && lane.busy) {
        lane.changed.awaitUninterruptibly(); // the database lock this replaces does not heed interrupts either
      }
      if (me.outcome == null) {
        lane.busy = true; // this thread pushes the waiting calls
      }
    } finally {
      lane.lock.unlock();
    }
    while (me.outcome == null) {
      List<Call> round = new ArrayList<>();
      lane.lock.lock();
      try {
        int items = 0;
        while (!lane.waiting.isEmpty()
            && (round.isEmpty() || items + lane.waiting.peek().prepared.queues().length <= MAX_ITEMS)) {
          Call c = lane.waiting.poll();
          round.add(c);
          items += c.prepared.queues().length;
        }
      } finally {
        lane.lock.unlock();
      }
      try {
        run(round, combined, alone);
      } finally {
        lane.lock.lock();
        try {
          for (Call c : round) {
            if (c.outcome == null) {
              c.outcome = ALONE; // only if run failed in a way it did not hand out
            }
          }
          if (me.outcome != null) {
            lane.busy = false;
            if (lane.waiting.isEmpty()) {
              lanes.remove(key, lane); // a thread still holding it leads it alone; nothing is lost, only not combined
            }
          }
          lane.changed.signalAll();
        } finally {
          lane.lock.unlock();
        }
      }
    }
    return outcome(me, alone);
  }

  private void run(List<Call> round, Function<PushBatch, List<PushResult>> combined,
      Function<PushBatch, List<PushResult>> alone) {
    if (round.size() == 1) {
      Call c = round.get(0);
      try {
        c.outcome = alone.apply(c.prepared);
      } catch (RuntimeException e) {
        c.outcome = e;
      }
      return;
    }
    List<PushBatch> parts = new ArrayList<>(round.size());
    for (Call c : round) {
      parts.add(c.prepared);
    }
    List<PushResult> all;
    try {
      all = combined.apply(PushBatch.concat(parts));
    } catch (PushOutcomeUnknownException e) {
      for (Call c : round) {
        c.outcome = new PushOutcomeUnknownException(e, c.prepared.itemsWithIds());
      }
      return;
    } catch (QueenDatabaseException e) {
      for (Call c : round) {
        c.outcome = e.isTransient() ? e : ALONE; // a lost database is everyone's; anything else may be one call's
      }
      return;
    } catch (RuntimeException e) {
      for (Call c : round) {
        c.outcome = ALONE;
      }
      return;
    }
    if (all == null) {
      for (Call c : round) {
        c.outcome = ALONE;
      }
      return;
    }
    metrics.pushesCombined(round.get(0).prepared.queues()[0], round.size());
    PushResult[] byIndex = new PushResult[all.size()];
    for (PushResult r : all) {
      byIndex[r.index()] = r;
    }
    int from = 0;
    for (Call c : round) {
      int n = c.prepared.queues().length;
      List<PushResult> mine = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        PushResult r = byIndex[from + i];
        mine.add(new PushResult(i, r.queue(), r.partition(), r.status(), r.messageId(), r.offset(), r.transactionId()));
      }
      c.outcome = mine;
      from += n;
    }
  }

  @SuppressWarnings("unchecked")
  private static List<PushResult> outcome(Call me, Function<PushBatch, List<PushResult>> alone) {
    if (me.outcome == ALONE) {
      return alone.apply(me.prepared);
    }
    if (me.outcome instanceof RuntimeException e) {
      throw e;
    }
    return (List<PushResult>) me.outcome;
  }
}
