package io.queen.embedded.internal;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.BatchHandler;
import io.queen.Message;
import io.queen.MessageHandler;
import io.queen.Subscription;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The consume loop: N worker threads, each popping a batch, running the handler in offset order per
 * partition, and acknowledging the batch in one call. A handler that throws (exception or
 * {@link Error}) fails its message: the rest of that partition's batch is not run and is redelivered
 * after it. Leases are renewed while handlers run. {@link #close} stops popping, waits for running
 * handlers up to the grace period, interrupts them, and gives back the leases still held (a message
 * interrupted by close is not counted as a failed attempt).
 */
final class SubscriptionImpl implements Subscription {
  private static final Logger LOG = LoggerFactory.getLogger(SubscriptionImpl.class);

  private final QueenImpl queen;
  private final Broker.PopRequest request;
  private final int concurrency;
  private final Duration defaultGrace;
  private final MessageHandler one;
  private final BatchHandler many;
  private final List<Thread> workers = new ArrayList<>();
  private final AtomicBoolean running = new AtomicBoolean(true);
  private final AtomicBoolean closed = new AtomicBoolean();
  private final AtomicLong handled = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  /** Leases held by running batches: one message per (partition, lease) stands for the lease. */
  private final Set<Message> inFlight = ConcurrentHashMap.newKeySet();
  private volatile ScheduledFuture<?> renewal;

  SubscriptionImpl(QueenImpl queen, Broker.PopRequest request, int concurrency, Duration grace, MessageHandler one,
      BatchHandler many) {
    this.queen = queen;
    this.request = request;
    this.concurrency = concurrency;
    this.defaultGrace = grace;
    this.one = one;
    this.many = many;
  }

  void start() {
    Duration lease = request.leaseTime() != null ? request.leaseTime() : queen.broker().config(request.queue()).leaseTime();
    long every = Math.max(50, lease.toMillis() / 3);
    renewal = queen.scheduler().scheduleAtFixedRate(this::renewLeases, every, every, TimeUnit.MILLISECONDS);
    for (int i = 0; i < concurrency; i++) {
      Thread t = queen.newThread(request.queue() + "-" + request.group() + "-" + i, this::work);
      workers.add(t);
    }
    workers.forEach(Thread::start);
    LOG.info("{} - consuming queue '{}' group '{}' with {} worker(s), batch {}", queen.nodeId(), request.queue(),
        request.group(), concurrency, request.batch());
  }

  @Override
  public String queue() {
    return request.queue();
  }

  @Override
  public String group() {
    return request.group();
  }

  @Override
  public boolean isRunning() {
    return running.get();
  }

  @Override
  public long handled() {
    return handled.get();
  }

  @Override
  public long failed() {
    return failed.get();
  }

  private void work() {
    long backoff = 0;
    while (running.get()) {
      try {
        long seen = queen.wakeups().version(request.queue());
        List<Message> batch = queen.broker().pop(request);
        backoff = 0;
        if (batch.isEmpty()) {
          queen.afterEmptyPop(this);
          queen.wakeups().await(request.queue(), seen, queen.config().pollInterval());
          continue;
        }
        runBatch(batch);
      } catch (InterruptedException e) {
        if (!running.get()) {
          break;
        }
        Thread.interrupted(); // not a shutdown: carry on
      } catch (RuntimeException e) {
        if (!running.get()) {
          break;
        }
        backoff = Math.min(queen.config().pollInterval().toMillis() * 4, Math.max(50, backoff * 2));
        LOG.warn("{} - consumer of '{}'/'{}' failed a round, retrying in {} ms: {}", queen.nodeId(), request.queue(),
            request.group(), backoff, e.toString());
        try {
          Thread.sleep(backoff);
        } catch (InterruptedException ie) {
          if (!running.get()) {
            break;
          }
        }
      }
    }
  }

  private void runBatch(List<Message> batch) {
    Map<Long, List<Message>> byPartition = new LinkedHashMap<>();
    for (Message m : batch) {
      byPartition.computeIfAbsent(m.partitionId(), k -> new ArrayList<>()).add(m);
    }
    List<Message> heads = new ArrayList<>();
    byPartition.values().forEach(l -> heads.add(l.get(0)));
    inFlight.addAll(heads);
    List<Broker.AckRequest> acks = new ArrayList<>(batch.size());
    List<Message> giveBack = new ArrayList<>();
    try {
      if (many != null) {
        long t0 = System.nanoTime();
        try {
          many.handle(batch);
          queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
          for (Message m : batch) {
            acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
          }
          handled.addAndGet(batch.size());
        } catch (Throwable t) {
          if (!running.get()) {
            giveBack.addAll(heads);
          } else {
            failed.incrementAndGet();
            logFailure(heads.get(0), t);
            for (Message h : heads) {
              acks.add(new Broker.AckRequest(h, AckStatus.FAILED, describe(t)));
            }
          }
        }
      } else {
        for (List<Message> part : byPartition.values()) {
          for (Message m : part) {
            if (!running.get() && Thread.currentThread().isInterrupted()) {
              giveBack.add(part.get(0));
              break;
            }
            long t0 = System.nanoTime();
            try {
              one.handle(m);
              queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
              acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
              handled.incrementAndGet();
            } catch (Throwable t) {
              queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
              if (!running.get()) {
                giveBack.add(part.get(0)); // interrupted by close: not the message's fault
              } else {
                failed.incrementAndGet();
                logFailure(m, t);
                acks.add(new Broker.AckRequest(m, AckStatus.FAILED, describe(t)));
              }
              break; // the rest of this partition comes again after it
            }
          }
        }
      }
      Thread.interrupted(); // an interrupt aimed at the handler must not fail the acknowledgement
      if (!acks.isEmpty()) {
        List<AckResult> res = queen.broker().ack(acks);
        long lost = res.stream().filter(r -> r.outcome() == AckOutcome.LEASE_LOST).count();
        if (lost > 0) {
          LOG.warn("{} - {} acknowledgement(s) of '{}'/'{}' rejected: the lease expired or was taken over; those"
              + " messages are redelivered to the new holder", queen.nodeId(), lost, request.queue(), request.group());
        }
      }
      if (!giveBack.isEmpty()) {
        queen.broker().release(giveBack);
      }
    } finally {
      inFlight.removeAll(heads);
    }
  }

  private void logFailure(Message m, Throwable t) {
    if (t instanceof Error) {
      LOG.error("{} - handler of '{}'/'{}' threw an Error on {}", queen.nodeId(), request.queue(), request.group(), m, t);
    } else {
      LOG.debug("{} - handler of '{}'/'{}' failed on {}: {}", queen.nodeId(), request.queue(), request.group(), m,
          t.toString());
    }
  }

  private static String describe(Throwable t) {
    String msg = t.getMessage();
    return msg != null ? msg : t.getClass().getName();
  }

  private void renewLeases() {
    if (inFlight.isEmpty()) {
      return;
    }
    try {
      queen.broker().renew(new ArrayList<>(inFlight));
    } catch (RuntimeException e) {
      LOG.warn("{} - lease renewal for '{}'/'{}' failed: {}", queen.nodeId(), request.queue(), request.group(),
          e.toString());
    }
  }

  @Override
  public void close() {
    close(defaultGrace);
  }

  @Override
  public void close(Duration grace) {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    running.set(false);
    queen.wakeups().wake(request.queue());
    long deadline = System.nanoTime() + grace.toNanos();
    boolean interrupted = false;
    for (Thread t : workers) {
      long left = deadline - System.nanoTime();
      try {
        t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    for (Thread t : workers) {
      if (t.isAlive()) {
        t.interrupt();
      }
    }
    for (Thread t : workers) {
      try {
        t.join(2000);
      } catch (InterruptedException e) {
        interrupted = true;
      }
      if (t.isAlive()) {
        LOG.warn("{} - worker {} did not stop within the grace period and an interrupt", queen.nodeId(), t.getName());
      }
    }
    ScheduledFuture<?> r = renewal;
    if (r != null) {
      r.cancel(false);
    }
    if (!inFlight.isEmpty()) {
      try {
        queen.broker().release(new ArrayList<>(inFlight));
      } catch (RuntimeException e) {
        LOG.warn("{} - could not release leases on close: {}", queen.nodeId(), e.toString());
      }
    }
    queen.unregister(this);
    LOG.info("{} - stopped consuming '{}'/'{}': {} handled, {} failed", queen.nodeId(), request.queue(),
        request.group(), handled.get(), failed.get());
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
