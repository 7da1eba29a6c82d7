package io.queen.embedded.internal.consume;

import io.queen.AckStatus;
import io.queen.BatchHandler;
import io.queen.DeadLetterException;
import io.queen.Message;
import io.queen.MessageHandler;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.HandlerAcks;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;

/**
 * The units of a plain handler (per message, per batch, or a connector's batch that acknowledges by itself): the
 * handler runs, then its acknowledgements go to the acker (a completed unit, without waiting) or are settled at once.
 * Logs under the subscription's logger.
 */
final class HandlerUnits {
  /** Hands a completed unit's acknowledgements to the acker; false when it cannot take them (closing). */
  interface Async {
    boolean settle(List<Broker.AckRequest> acks);
  }

  private final Logger log;
  private final ConsumerNode queen;
  private final Broker.PopRequest request;
  private final String where;
  private final MessageHandler one;
  private final BatchHandler many;
  /** A connector's batch handler that acknowledges by itself (the SPI's {@code OwnedBatchHandler}). */
  private final io.queen.embedded.spi.OwnedBatchHandler owned;
  private final Settlement outcomes;
  /** False once the subscription closes. */
  private final BooleanSupplier running;

  HandlerUnits(Logger log, ConsumerNode queen, Broker.PopRequest request, String where, MessageHandler one,
      BatchHandler many, io.queen.embedded.spi.OwnedBatchHandler owned, Settlement outcomes, BooleanSupplier running) {
    this.log = log;
    this.queen = queen;
    this.request = request;
    this.where = where;
    this.one = one;
    this.many = many;
    this.owned = owned;
    this.outcomes = outcomes;
    this.running = running;
  }

  /**
   * MessageHandler: run in order per partition, then acknowledge what ran in one call.
   *
   * <p>A failed message's partition stops there, and its lease is given back after the acknowledgement: a failure that dead-letters the message (no retries left) moves the cursor past it but
   * keeps the lease over the rest of the batch, which would otherwise wait, unhandled, for the lease to expire.
   */
  boolean runEach(Map<Long, List<Message>> byPartition, Async async) {
    List<Broker.AckRequest> acks = new ArrayList<>();
    List<Message> giveBack = new ArrayList<>();
    List<Message> failedAt = new ArrayList<>();
    for (List<Message> part : byPartition.values()) {
      for (Message m : part) {
        if (stopping()) {
          giveBack.add(part.get(0));
          break;
        }
        long t0 = System.nanoTime();
        HandlerAcks.begin();
        try {
          one.handle(m);
          queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
          if (HandlerAcks.end().contains(m)) {
            // the handler's own commit acknowledged it (commit(connection) with ack(m))
            outcomes.count(outcomes.acked, "acked", 1);
          } else {
            acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
          }
          outcomes.handled.incrementAndGet();
        } catch (DeadLetterException d) {
          queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
          // at once; the partition goes on
          acks.add(new Broker.AckRequest(m, AckStatus.DEAD_LETTER, Settlement.describe(d)));
        } catch (Throwable t) {
          queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
          if (!running.getAsBoolean()) {
            giveBack.add(part.get(0)); // interrupted by close: not the message's fault
          } else {
            outcomes.count(outcomes.failed, "failed", 1);
            outcomes.logFailure(m, t);
            acks.add(new Broker.AckRequest(m, AckStatus.FAILED, Settlement.describe(t)));
            failedAt.add(m);
          }
          break; // the rest of this partition comes again after it
        }
      }
    }
    HandlerAcks.end(); // a handler that threw: whatever it committed, its failure is settled below
    if (giveBack.isEmpty() && !acks.isEmpty() && acks.stream().allMatch(a -> a.status() == AckStatus.COMPLETED)
        && async.settle(acks)) {
      return true;
    }
    outcomes.settle(acks);
    outcomes.giveBack(giveBack);
    outcomes.giveBack(failedAt);
    return false;
  }

  /** BatchHandler: one call for the batch, then acknowledge all of it or fail the heads. */
  boolean runMany(List<Message> batch, List<Message> heads, Async async) {
    List<Broker.AckRequest> acks = new ArrayList<>(batch.size());
    long t0 = System.nanoTime();
    HandlerAcks.begin();
    try {
      many.handle(batch);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      Set<Message> ackedByHandler = HandlerAcks.end();
      for (Message m : batch) {
        if (ackedByHandler.contains(m)) {
          outcomes.count(outcomes.acked, "acked", 1); // the handler's own commit acknowledged it
        } else {
          acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
        }
      }
      outcomes.handled.addAndGet(batch.size());
      if (acks.isEmpty()) {
        return false;
      }
    } catch (Throwable t) {
      HandlerAcks.end();
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      if (!running.getAsBoolean()) {
        outcomes.giveBack(heads);
        return false;
      }
      outcomes.failHeads(heads, batch.size(), t);
      return false;
    }
    if (async.settle(acks)) {
      return true;
    }
    outcomes.settle(acks);
    return false;
  }

  /**
   * OwnedBatchHandler: the handler commits and acknowledges by itself, or hands back what it completed, which
   * goes to the acker like a plain handler's completed unit (returns true then: the ack is in flight). When it
   * throws, the leases it still holds are given back without counting an attempt (the handler decides what is
   * an attempt).
   */
  boolean runOwned(List<Message> batch, List<Message> heads, Async async) {
    long t0 = System.nanoTime();
    List<Message> done;
    try {
      done = owned.handle(batch);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      outcomes.handled.addAndGet(batch.size());
    } catch (Throwable t) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      if (running.getAsBoolean()) {
        log.debug("{} - handler of {} gave its batch back: {}", queen.nodeId(), where, Sql.describe(t));
      }
      try {
        outcomes.giveBack(heads); // a lease the handler completed is gone already; giving it back again changes nothing
      } catch (RuntimeException e) {
        log.debug("{} - could not give back the leases of {}: {}", queen.nodeId(), where, Sql.describe(e));
      }
      return false;
    }
    if (done == null || done.isEmpty()) {
      return false;
    }
    List<Broker.AckRequest> acks = new ArrayList<>(done.size());
    for (Message m : done) {
      acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
    }
    if (async.settle(acks)) {
      return true;
    }
    outcomes.settle(acks); // closing: acknowledged here and now
    return false;
  }

  private boolean stopping() {
    return !running.getAsBoolean() && Thread.currentThread().isInterrupted();
  }
}
