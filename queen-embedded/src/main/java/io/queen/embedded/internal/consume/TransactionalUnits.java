package io.queen.embedded.internal.consume;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.BrokerClosedException;
import io.queen.CommitResult;
import io.queen.DeadLetterException;
import io.queen.KvReason;
import io.queen.KvWriteResult;
import io.queen.Message;
import io.queen.QueenDatabaseException;
import io.queen.Transaction;
import io.queen.TransactionalBatchHandler;
import io.queen.TransactionalHandler;
import io.queen.embedded.internal.db.LogThrottle;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.tx.TransactionImpl;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;

/**
 * The units of a transactional handler: each message's (or the batch's) bundle commits the handler's statements, KV
 * writes and pushes together with the acknowledgement, and its outcome (a lost lease, a marker already there, a
 * failed precondition) decides what the partition does next. Logs under the subscription's logger.
 */
final class TransactionalUnits {
  private final Logger log;
  private final ConsumerNode queen;
  private final Broker.PopRequest request;
  private final String where;
  private final TransactionalBatchHandler txMany;
  private final Settlement outcomes;
  /** False once the subscription closes. */
  private final BooleanSupplier running;
  /** The bundles of transactional handlers running now: a close past its grace period aborts their connections. */
  private final Set<TransactionImpl> openTransactions = ConcurrentHashMap.newKeySet();
  private final AtomicBoolean warnedUnrequiredMarker = new AtomicBoolean();
  private final AtomicBoolean warnedSelfCommit = new AtomicBoolean();

  TransactionalUnits(Logger log, ConsumerNode queen, Broker.PopRequest request, String where,
      TransactionalBatchHandler txMany, Settlement outcomes, BooleanSupplier running) {
    this.log = log;
    this.queen = queen;
    this.request = request;
    this.where = where;
    this.txMany = txMany;
    this.outcomes = outcomes;
    this.running = running;
  }

  /** The bundles running now. */
  Set<TransactionImpl> openTransactions() {
    return openTransactions;
  }

  private boolean stopping() {
    return !running.getAsBoolean() && Thread.currentThread().isInterrupted();
  }

  /** What to do with the rest of a partition's batch after one message. */
  private enum Next {
    CONTINUE,
    STOP
  }

  /** TransactionalHandler: one bundle per message, in order; stop the partition at the first that does not commit. */
  void runTxEach(List<Message> part, TransactionalHandler handler) {
    for (Message m : part) {
      if (stopping()) {
        outcomes.giveBack(List.of(part.get(0)));
        return;
      }
      TransactionImpl tx = transactionOrNull();
      if (tx == null) {
        outcomes.giveBack(List.of(part.get(0)));
        return;
      }
      try {
        if (runTx(m, part, handler, tx) == Next.STOP) {
          return;
        }
      } finally {
        tx.close(); // the handler's connection, if it took one, back to the pool
      }
    }
  }

  /** One message of {@link #runTxEach}: the handler, then its bundle with the ack. */
  private Next runTx(Message m, List<Message> part, TransactionalHandler handler, TransactionImpl tx) {
    long t0 = System.nanoTime();
    try {
      handler.handle(m, tx);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      outcomes.handled.incrementAndGet();
    } catch (DeadLetterException d) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      tx.close(); // nothing of its bundle applies, the handler's statements included
      if (!outcomes.settle(List.of(new Broker.AckRequest(m, AckStatus.DEAD_LETTER, Settlement.describe(d))))) {
        return Next.STOP;
      }
      return Next.CONTINUE; // the partition goes on
    } catch (Throwable t) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      tx.close();
      if (!running.getAsBoolean()) {
        outcomes.giveBack(List.of(part.get(0)));
      } else {
        outcomes.fail(m, t);
      }
      return Next.STOP;
    }
    return commit(tx, List.of(m), List.of(part.get(0)));
  }

  /** A transaction for a handler, or null once the node has closed (a worker that outlived the grace period). */
  private TransactionImpl transactionOrNull() {
    try {
      TransactionImpl tx = queen.handlerTransaction();
      tx.onClose(() -> openTransactions.remove(tx));
      openTransactions.add(tx);
      return tx;
    } catch (BrokerClosedException e) {
      return null;
    }
  }

  /** TransactionalBatchHandler: one bundle for the batch and its acknowledgement. */
  void runTxBatch(List<Message> batch, Map<Long, List<Message>> byPartition, List<Message> heads) {
    TransactionImpl tx = transactionOrNull();
    if (tx == null) {
      outcomes.giveBack(heads);
      return;
    }
    try {
      runTxBatch(batch, byPartition, heads, tx);
    } finally {
      tx.close();
    }
  }

  private void runTxBatch(List<Message> batch, Map<Long, List<Message>> byPartition, List<Message> heads,
      TransactionImpl tx) {
    long t0 = System.nanoTime();
    try {
      txMany.handle(batch, tx);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      outcomes.handled.addAndGet(batch.size());
    } catch (Throwable t) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      tx.close(); // nothing of its bundle applies, the handler's statements included
      if (!running.getAsBoolean()) {
        outcomes.giveBack(heads);
      } else {
        outcomes.failHeads(heads, batch.size(), t);
      }
      return;
    }
    CommitResult res = commitOrNull(tx, batch, heads);
    tx.close();
    if (res == null || res.success()) {
      return;
    }
    if (lostLease(res)) {
      // the partitions whose ack was refused belong to another consumer now (ALREADY_ACKED: it has finished the
      // message already); give the others back at once
      AckOutcome why = res.reason() == CommitResult.Reason.LEASE_LOST ? AckOutcome.LEASE_LOST : AckOutcome.ALREADY_ACKED;
      Set<Long> lost = new java.util.HashSet<>();
      for (AckResult a : res.acks()) {
        if (a.outcome() == why) {
          lost.add(a.partitionId());
        }
      }
      List<Message> keep = new ArrayList<>();
      for (Message h : heads) {
        if (lost.contains(h.partitionId())) {
          outcomes.count(outcomes.leaseLost, "lease_lost", byPartition.get(h.partitionId()).size());
        } else {
          keep.add(h);
        }
      }
      logLeaseLost(lost.size());
      outcomes.giveBack(keep);
      return;
    }
    if (markerExists(res)) {
      // some message of the batch was done before; find out which, one message (and one bundle) at a time
      for (List<Message> part : byPartition.values()) {
        runTxEach(part, (m, t) -> txMany.handle(List.of(m), t));
      }
      return;
    }
    outcomes.failHeads(heads, batch.size(), preconditionFailure(res));
  }

  /**
   * Adds the acknowledgement of {@code messages} to the handler's bundle, commits it, and acts on the
   * outcome. {@code heads} stand for the leases involved.
   */
  private Next commit(Transaction tx, List<Message> messages, List<Message> heads) {
    CommitResult res = commitOrNull(tx, messages, heads);
    if (res == null) {
      return Next.STOP;
    }
    if (res.success()) {
      return Next.CONTINUE;
    }
    if (lostLease(res)) {
      outcomes.count(outcomes.leaseLost, "lease_lost", messages.size());
      logLeaseLost(1);
      return Next.STOP;
    }
    if (markerExists(res)) {
      outcomes.count(outcomes.alreadyDone, "already_done", messages.size());
      List<Broker.AckRequest> acks = new ArrayList<>(messages.size());
      for (Message m : messages) {
        acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
      }
      return outcomes.settle(acks, false) ? Next.CONTINUE : Next.STOP;
    }
    outcomes.fail(messages.get(0), preconditionFailure(res));
    return Next.STOP;
  }

  /**
   * Commits a handler's bundle with the acknowledgement of {@code messages}. Returns the result, or
   * {@code null} when there is none to act on (the commit failed and was dealt with here).
   */
  private CommitResult commitOrNull(Transaction tx, List<Message> messages, List<Message> heads) {
    CommitResult res;
    try {
      try {
        tx.ack(messages);
      } catch (IllegalStateException committedByHandler) {
        // the handler committed the bundle itself: its effects are in, the ack is not; acknowledge alone
        if (warnedSelfCommit.compareAndSet(false, true)) {
          log.warn("{} - a transactional handler of {} committed its transaction itself; the loop commits it (with the"
              + " ack), so the effect and the ack were two commits", queen.nodeId(), where);
        }
        List<Broker.AckRequest> acks = new ArrayList<>(messages.size());
        messages.forEach(m -> acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null)));
        outcomes.settle(acks);
        return null;
      }
      res = tx.commit();
    } catch (QueenDatabaseException e) {
      if (!e.isTransient()) {
        outcomes.failHeads(heads, messages.size(), e);
        return null;
      }
      // the database's trouble, not the message's (a lost connection, a full disk, no free connection): give the
      // leases back without blaming the message; on redelivery its marker tells whether this commit happened
      LogThrottle.Decision d = outcomes.throttle.admit(LogThrottle.kind("commit", e));
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        log.warn("{} - commit of a bundle of {} failed ({}); its outcome is unknown, so the lease is given back and the"
            + " message redelivered", queen.nodeId(), where, Sql.describe(e));
      }
      outcomes.giveBackPatiently(heads);
      return null;
    } catch (BrokerClosedException e) {
      // the node finished closing while this handler ran past the grace period: not the message's fault
      outcomes.giveBack(heads);
      return null;
    } catch (RuntimeException e) {
      outcomes.failHeads(heads, messages.size(), e);
      return null;
    }
    if (res.success()) {
      outcomes.count(outcomes.acked, "acked", messages.size());
      if (!warnedUnrequiredMarker.get()) {
        for (KvWriteResult w : res.writes()) {
          if (!w.applied() && w.reason() == KvReason.EXISTS && warnedUnrequiredMarker.compareAndSet(false, true)) {
            log.warn("{} - a transactional handler of {} committed its bundle although a putIfAbsent/once write found its"
                + " key already there: mark the marker write required() so that the bundle's effects apply only once",
                queen.nodeId(), where);
          }
        }
      }
    }
    return res;
  }

  /**
   * Whether the bundle came from a consumer that no longer holds the partition: its lease was refused, or another
   * consumer took the partition over and has already finished the message (the ack answered ALREADY_ACKED, and the
   * bundle's effects were kept out).
   */
  private static boolean lostLease(CommitResult res) {
    return res.reason() == CommitResult.Reason.LEASE_LOST || res.reason() == CommitResult.Reason.ALREADY_ACKED;
  }

  private static boolean markerExists(CommitResult res) {
    return res.reason() == CommitResult.Reason.KV_PRECONDITION && !res.writes().isEmpty()
        && res.writes().get(res.writes().size() - 1).reason() == KvReason.EXISTS;
  }

  private static IllegalStateException preconditionFailure(CommitResult res) {
    KvWriteResult w = res.writes().isEmpty() ? null : res.writes().get(res.writes().size() - 1);
    return new IllegalStateException("a required KV write of the bundle was not applied (operation "
        + res.failedOperation() + (w != null ? ", reason " + w.reason() : "") + ")");
  }

  private void logLeaseLost(int partitions) {
    LogThrottle.Decision d = outcomes.throttle.admit("lease-lost");
    if (d.level() != LogThrottle.Level.SUPPRESS) {
      log.warn("{} - {}: the lease of {} partition(s) expired or was taken over before the bundle committed; nothing of"
          + " it was applied and another consumer has those messages (handlers slower than the lease time?)",
          queen.nodeId(), where, partitions);
    }
  }
}
