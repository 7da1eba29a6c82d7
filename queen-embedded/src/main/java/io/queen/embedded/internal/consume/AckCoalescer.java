package io.queen.embedded.internal.consume;

import io.queen.AckResult;
import io.queen.embedded.internal.log.Broker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Commits the acknowledgements of a subscription's workers together. A worker hands its acks over and
 * waits for their results; one flusher thread sends whatever has gathered while the previous call was
 * running as ONE call of {@code ack} (one transaction, one WAL flush). With sixteen workers finishing one
 * message each, that is one commit instead of sixteen: the same group commit PostgreSQL would do, but
 * without sixteen round trips and sixteen flush waits competing for the WAL. A lone ack pays one thread
 * hand-off. Results are exactly those of {@link Broker#ack(List)} for each worker's own requests. When the
 * combined call fails for a reason other than a lost connection (something in one share was refused), each
 * share is sent again alone, so one worker's bad request costs the others nothing; a lost connection (which
 * {@link Broker#ack(List)} already retried) fails every share, as each worker's own call would have.
 */
final class AckCoalescer implements AutoCloseable {
  /** Most acknowledgements in one call. */
  static final int MAX_ACKS = 2_000;

  private record Pending(List<Broker.AckRequest> acks, CompletableFuture<List<AckResult>> done) {}

  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(AckCoalescer.class);

  private final Broker broker;
  private final Duration patience;
  private final String who;
  private final LinkedBlockingQueue<Pending> queue = new LinkedBlockingQueue<>();
  private final Thread flusher;
  private volatile boolean running = true;

  /**
   * @param patience how long a call that fails on the database's trouble (a lost connection, a full disk, no free
   *     connection: a transient failure) is tried again before its acks fail: the lease time, while which the leases
   *     stay renewed, so an outage shorter than that costs the messages no attempt (a lease left to expire on a live
   *     node counts one)
   * @param who the node and the queue and group, for log lines
   */
  AckCoalescer(Broker broker, Duration patience, String who, java.util.function.Function<Runnable, Thread> threads) {
    this.broker = broker;
    this.patience = patience;
    this.who = who;
    this.flusher = threads.apply(this::flushLoop);
    this.flusher.start();
  }

  /**
   * Acknowledges {@code acks} (in one call with whatever other workers hand over meanwhile) and returns
   * their results in order. Waits for the call even if this thread is interrupted (the interrupt is kept):
   * an acknowledgement that was sent must be known.
   */
  List<AckResult> ack(List<Broker.AckRequest> acks) {
    if (!running) {
      return broker.ack(acks, true); // closing: nothing to coalesce with
    }
    Pending p = new Pending(acks, new CompletableFuture<>());
    queue.add(p);
    boolean interrupted = false;
    try {
      while (true) {
        try {
          return p.done().get(1, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (TimeoutException e) {
          if (!flusher.isAlive() && queue.remove(p)) {
            return broker.ack(acks, true); // the flusher is gone (closed meanwhile): send it alone
          }
        } catch (ExecutionException e) {
          if (e.getCause() instanceof RuntimeException re) {
            throw re;
          }
          throw new IllegalStateException(e.getCause());
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Hands {@code acks} over without waiting: {@code onResults} (or {@code onError}) runs on the flusher
   * thread once their call returned, and must be quick. When closing, the call is made here and now.
   */
  void ackAsync(List<Broker.AckRequest> acks, java.util.function.Consumer<List<AckResult>> onResults,
      java.util.function.Consumer<RuntimeException> onError) {
    CompletableFuture<List<AckResult>> done = new CompletableFuture<>();
    done.whenComplete((res, err) -> {
      try {
        if (err == null) {
          onResults.accept(res);
        } else {
          onError.accept(err instanceof RuntimeException re ? re : new IllegalStateException(err));
        }
      } catch (RuntimeException e) {
        org.slf4j.LoggerFactory.getLogger(AckCoalescer.class).warn("acknowledgement callback failed: {}", e.toString());
      }
    });
    if (!running || !flusher.isAlive()) {
      try {
        done.complete(broker.ack(acks, true));
      } catch (RuntimeException e) {
        done.completeExceptionally(e);
      }
      return;
    }
    queue.add(new Pending(acks, done));
  }

  private void flushLoop() {
    List<Pending> batch = new ArrayList<>();
    while (running || !queue.isEmpty()) {
      batch.clear();
      try {
        Pending first = queue.poll(200, TimeUnit.MILLISECONDS);
        if (first == null) {
          continue;
        }
        batch.add(first);
      } catch (InterruptedException e) {
        if (!running) {
          continue; // drain what is left, then stop
        }
        continue;
      }
      int n = batch.get(0).acks().size();
      Pending next;
      while (n < MAX_ACKS && (next = queue.poll()) != null) {
        batch.add(next);
        n += next.acks().size();
      }
      List<Broker.AckRequest> all = new ArrayList<>(n);
      for (Pending p : batch) {
        all.addAll(p.acks());
      }
      try {
        List<AckResult> res = sendPatiently(all);
        int from = 0;
        for (Pending p : batch) {
          int to = from + p.acks().size();
          p.done().complete(List.copyOf(res.subList(from, to)));
          from = to;
        }
      } catch (RuntimeException e) {
        if (batch.size() > 1 && !(e instanceof io.queen.QueenDatabaseException q && q.isTransient())) {
          // something in one worker's share was refused: send each share alone, so the others' acks still count
          for (Pending p : batch) {
            sendAlone(p);
          }
        } else {
          for (Pending p : batch) {
            p.done().completeExceptionally(e);
          }
        }
      } catch (Error e) {
        for (Pending p : batch) {
          p.done().completeExceptionally(e);
        }
      }
    }
  }

  /** {@link Broker#ack} of {@code all}, tried again on a transient failure for {@link #patience} ({@link Patiently}). */
  private List<AckResult> sendPatiently(List<Broker.AckRequest> all) {
    return Patiently.call(patience, () -> running,
        e -> LOG.warn("{} - could not acknowledge {} message(s) ({}); trying again while the database does not answer,"
            + " for up to the lease time", who, all.size(), io.queen.embedded.internal.db.Sql.describe(e)),
        tries -> LOG.info("{} - acknowledged {} message(s) after {} tries", who, all.size(), tries),
        () -> broker.ack(all, true));
  }

  private void sendAlone(Pending p) {
    try {
      p.done().complete(broker.ack(p.acks(), true));
    } catch (RuntimeException e) {
      p.done().completeExceptionally(e);
    }
  }

  /** Stops the flusher after it has sent what was handed over. */
  @Override
  public void close() {
    running = false;
    // no interrupt: the flusher sees the flag within its 200 ms poll, and an interrupt could fail the call it is
    // making (a pool waiting for a connection gives up on one), so acknowledgements already made would be lost
    try {
      flusher.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
