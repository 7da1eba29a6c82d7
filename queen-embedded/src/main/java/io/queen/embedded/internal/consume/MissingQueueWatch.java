package io.queen.embedded.internal.consume;

import io.queen.Queen;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;

/**
 * For a subscription whose queue did not exist when it started: a pop of an unknown queue returns nothing
 * and creates nothing, so without this a misspelt queue name would wait in silence. Says so once at WARN
 * (on the first empty round that finds the queue missing), checks whether the queue exists at most once per poll interval, only
 * after empty pops, and stops checking (with one INFO) once it does. Thread-safe: the subscription's
 * workers share it, and one of them checks per interval.
 */
public final class MissingQueueWatch {
  private final ConsumerNode queen;
  /** The subscription's logger: what the watch says is said under the consumer's name. */
  private final Logger log;
  private final String queue;
  private final String group;
  private final long intervalNanos;
  private final AtomicBoolean warned = new AtomicBoolean();
  private final AtomicLong nextCheck = new AtomicLong(System.nanoTime());

  MissingQueueWatch(ConsumerNode queen, String queue, String group, Logger log) {
    this.queen = queen;
    this.log = log;
    this.queue = queue;
    this.group = group;
    this.intervalNanos = queen.pollInterval().toNanos();
  }

  /** After a pop that returned nothing; true once the queue exists (then the watch is done). */
  public boolean afterEmptyPop() {
    long due = nextCheck.get();
    long now = System.nanoTime();
    if (now - due < 0 || !nextCheck.compareAndSet(due, now + intervalNanos)) {
      return false;
    }
    boolean exists;
    try {
      exists = queen.broker().catalogue().queueExists(queue);
    } catch (RuntimeException e) {
      return false; // the pops fail the same way and the loop reports that; check again next interval
    }
    if (exists) {
      if (warned.get()) {
        log.info("{} - queue '{}' exists now: consumer of {} reads it", queen.nodeId(), queue, describeGroup(group));
      }
      return true;
    }
    if (warned.compareAndSet(false, true)) {
      log.warn("{} - queue '{}' does not exist yet: consumer of {} waits for its first push", queen.nodeId(), queue,
          describeGroup(group));
    }
    return false;
  }

  /** The group as an operator reads it: the default group is not called by its internal name. */
  static String describeGroup(String group) {
    return Queen.DEFAULT_GROUP.equals(group) ? "the queue's default group" : "group '" + group + "'";
  }
}
