package io.queen.embedded.internal.consume;

import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.embedded.internal.db.LogThrottle;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.slf4j.Logger;

/**
 * How a subscription's units end: acknowledgements sent (through its {@link AckCoalescer} once that runs) and counted,
 * failures logged and acknowledged, leases given back. It holds the subscription's outcome counters and the throttle
 * of its log lines, and logs under the subscription's logger. Thread-safe: the workers share it.
 */
final class Settlement {
  private final Logger log;
  private final Broker broker;
  private final String node;
  private final String queue;
  private final String group;
  private final String where;
  private final Supplier<AckCoalescer> acker;
  private final BooleanSupplier running;
  private final Supplier<Duration> lease;
  final AtomicLong handled = new AtomicLong();
  final AtomicLong failed = new AtomicLong();
  final AtomicLong acked = new AtomicLong();
  final AtomicLong alreadyDone = new AtomicLong();
  final AtomicLong deadLettered = new AtomicLong();
  final AtomicLong leaseLost = new AtomicLong();
  /** Summarises repeated failures of one kind (handler, ack, commit, renew, give-back) in the log. */
  final LogThrottle throttle = new LogThrottle();

  /**
   * @param acker the subscription's acker, null until its threads start
   * @param running false once the subscription closes
   * @param lease the lease time of its pops
   */
  Settlement(Logger log, Broker broker, String node, String queue, String group, String where,
      Supplier<AckCoalescer> acker, BooleanSupplier running, Supplier<Duration> lease) {
    this.log = log;
    this.broker = broker;
    this.node = node;
    this.queue = queue;
    this.group = group;
    this.where = where;
    this.acker = acker;
    this.running = running;
    this.lease = lease;
  }

  /** Counts an outcome here and as {@code queen.consumer.outcomes{queue,group,outcome}}. */
  void count(AtomicLong counter, String outcome, long n) {
    counter.addAndGet(n);
    broker.metrics().consumerOutcome(queue, group, outcome, n);
  }

  /** Fails one message (attempt counted). */
  void fail(Message m, Throwable t) {
    count(failed, "failed", 1);
    logFailure(m, t);
    settle(List.of(new Broker.AckRequest(m, AckStatus.FAILED, describe(t))));
    // a dead-lettering failure keeps the lease over the rest of the batch (see HandlerUnits.runEach)
    giveBack(List.of(m));
  }

  /**
   * Fails the first message of each partition (the rest comes again with it). The log names the batch: a batch
   * handler's exception does not say which of its messages it came from.
   */
  void failHeads(List<Message> heads, int batchSize, Throwable t) {
    count(failed, "failed", 1);
    logFailure(batchSize <= 1 ? at(heads.get(0)) : "a batch of " + batchSize + " messages from " + heads.size()
        + " partition(s), the first at " + at(heads.get(0)), t);
    List<Broker.AckRequest> acks = new ArrayList<>(heads.size());
    for (Message h : heads) {
      acks.add(new Broker.AckRequest(h, AckStatus.FAILED, describe(t)));
    }
    settle(acks);
    // a dead-lettering failure keeps the lease over the rest of the batch (see HandlerUnits.runEach)
    giveBack(heads);
  }

  /**
   * Sends acknowledgements and counts their outcomes. Returns false when a lease was found lost. A
   * failure to send is logged; the leases then expire and the messages come again.
   */
  boolean settle(List<Broker.AckRequest> acks) {
    return settle(acks, true);
  }

  /** @param countAcked whether completed acknowledgements count in {@link #acked} */
  boolean settle(List<Broker.AckRequest> acks, boolean countAcked) {
    if (acks.isEmpty()) {
      return true;
    }
    Thread.interrupted(); // an interrupt aimed at the handler must not fail the acknowledgement
    List<AckResult> res;
    try {
      AckCoalescer a = acker.get();
      res = a != null ? a.ack(acks) : broker.ack(acks, true);
    } catch (RuntimeException e) {
      LogThrottle.Decision d = throttle.admit(LogThrottle.kind("ack", e));
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        log.warn("{} - could not acknowledge {} message(s) of {}: {}; their leases expire and they are redelivered",
            node, acks.size(), where, Sql.describe(e));
      }
      return false;
    }
    return count(res, countAcked);
  }

  /** Counts acknowledgement outcomes (completed ones as acked); returns false when a lease was found lost. */
  boolean count(List<AckResult> res) {
    return count(res, true);
  }

  boolean count(List<AckResult> res, boolean countAcked) {
    long lost = 0;
    for (AckResult r : res) {
      switch (r.outcome()) {
        case LEASE_LOST -> lost++;
        case DEAD_LETTERED -> count(deadLettered, "dead_lettered", 1);
        case RETRY_SCHEDULED, REDELIVER -> { }
        default -> {
          if (countAcked) {
            count(acked, "acked", 1);
          }
        }
      }
    }
    if (lost > 0) {
      count(leaseLost, "lease_lost", lost);
      LogThrottle.Decision d = throttle.admit("ack-lease-lost");
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        log.warn("{} - {} acknowledgement(s) of {} rejected: the lease expired or was taken over (handlers slower than"
            + " the lease time?); those messages are redelivered to the new holder", node, lost, where);
      }
    }
    return lost == 0;
  }

  void giveBack(List<Message> heads) {
    if (heads.isEmpty()) {
      return;
    }
    try {
      broker.release(heads);
    } catch (RuntimeException e) {
      if (running.getAsBoolean()) { // (closing: close gives back what is left)
        log.warn("{} - could not give back {} lease(s) of {}: {}; they expire after the lease time", node,
            heads.size(), where, Sql.describe(e));
      }
    }
  }

  /**
   * Gives the leases back after a transient failure, tried again while the database does not answer for up to the
   * lease time ({@link Patiently}), so an outage shorter than the lease costs the message no attempt. Stops trying when
   * the subscription closes (close gives back what is left).
   */
  void giveBackPatiently(List<Message> heads) {
    if (heads.isEmpty()) {
      return;
    }
    try {
      Patiently.call(lease.get(), running,
          e -> {
            if (throttle.admit(LogThrottle.kind("give-back", e)).level() != LogThrottle.Level.SUPPRESS) {
              log.warn("{} - could not give back {} lease(s) of {} ({}); trying again while the database does not"
                  + " answer, for up to the lease time", node, heads.size(), where, Sql.describe(e));
            }
          },
          tries -> log.info("{} - gave back {} lease(s) of {} after {} tries", node, heads.size(), where,
              tries),
          () -> {
            broker.release(heads);
            return null;
          });
    } catch (RuntimeException e) {
      if (running.getAsBoolean()) { // (closing: close gives back what is left)
        log.warn("{} - could not give back {} lease(s) of {}: {}; they expire after the lease time", node,
            heads.size(), where, Sql.describe(e));
      }
    }
  }

  /**
   * WARN once per failed message and attempt, with the exception; identical repeats within a minute are
   * logged without the stack trace, and past ten, only counted.
   */
  void logFailure(Message m, Throwable t) {
    logFailure(at(m), t);
  }

  static String at(Message m) {
    return "partition '" + m.partition() + "' offset " + m.offset() + " attempt " + m.attempt();
  }

  void logFailure(String at, Throwable t) {
    LogThrottle.Decision d = throttle.admit(LogThrottle.kind("handler", t));
    if (d.suppressedBefore() > 0) {
      log.warn("{} - handler of {}: {} identical failure(s) were not logged in the previous minute", node,
          where, d.suppressedBefore());
    }
    switch (d.level()) {
      case FULL -> log.warn("{} - handler of {} failed on {}", node, where, at, Sql.forLog(t));
      case SHORT -> log.warn("{} - handler of {} failed on {}: {} (repeated failure, stack trace above)", node,
          where, at, Sql.forLog(t).toString());
      case SUPPRESS -> log.debug("{} - handler of {} failed on {}: {}", node, where, at, Sql.forLog(t).toString());
    }
  }

  /** The error kept with a failed or dead-lettered message: the handler's message, JDBC detail lines removed. */
  static String describe(Throwable t) {
    return Sql.errorText(t);
  }
}
