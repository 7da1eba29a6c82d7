package io.queen.embedded.internal.log;

import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushResult;
import java.util.List;

/**
 * What the broker reports as it works. The default does nothing; the Micrometer implementation in the {@code ops} package is used when
 * the application gives a Micrometer {@code MeterRegistry} (micrometer-core is an optional dependency,
 * loaded only then). Tags are low-cardinality: queue, group — never partition or message id.
 */
public interface Metrics {
  Metrics NOOP = new Metrics() {
    @Override
    public boolean enabled() {
      return false;
    }
  };

  /** False when nothing is reported (callers skip work that only feeds the metrics). */
  default boolean enabled() {
    return true;
  }

  default void pushed(List<PushResult> results) {}

  default void delivered(String queue, String group, List<Message> messages) {}

  default void acked(String queue, String group, List<AckResult> results) {}

  default void handled(String queue, String group, long nanos, boolean ok) {}

  /**
   * A subscription settled messages: {@code outcome} is acked, already_done, failed, dead_lettered or
   * lease_lost (the counts of {@link io.queen.Subscription}).
   */
  default void consumerOutcome(String queue, String group, String outcome, long n) {}

  /** The consume loop popped: {@code empty} when the pop found nothing. */
  default void consumerPop(String queue, String group, boolean empty) {}

  /**
   * A message was moved to the dead-letter queue ({@code kept}) or, with deadLetter off, dropped, by an ack or an
   * expired lease.
   */
  default void deadLettered(String queue, String group, boolean kept) {}

  /**
   * A bundle of markers then acks went as one statement ({@code applied}), or met a key that had a row or a lost lease
   * and went the general way ({@code false}).
   */
  default void markerStatement(boolean applied) {}

  /** {@code calls} pushes into one partition of {@code queue} went as one combined transaction. */
  default void pushesCombined(String queue, int calls) {}

  /** A group's lag figures, read every ten seconds on every node. */
  default void groupLag(String queue, String group, long lag, double pendingAgeSeconds, boolean alert) {}

  /**
   * The messages of a queue that wait for a key this node does not hold (read every ten seconds on every node; 0
   * once none wait).
   */
  default void waitingForKey(String queue, long messages) {}

  /**
   * A pass of this node's receipt janitor: the push receipts it removed, the receipts left (PostgreSQL's estimate of the
   * table's rows) and the age of the oldest left (seconds, 0 when none).
   */
  default void pushReceipts(long removed, long stored, double oldestAgeSeconds) {}

  /** Retention removed messages of a queue (this node's janitor). */
  default void retentionRemoved(String queue, long n) {}

  /** Retention removed empty, idle partitions of a queue (this node's janitor). */
  default void partitionsRemoved(String queue, long n) {}

  /** A consumer group of {@code queue} was removed for being idle past {@code groupIdleExpiry}. */
  default void groupExpired(String queue) {}

  /** Retention removed messages a group had not consumed (allowDropPastCommitted). */
  default void retentionLost(String queue, String group, long n) {}

  /**
   * The retention state of a queue: age of its oldest kept message (seconds, 0 when empty) and the group holding it
   * back (null when none).
   */
  default void retentionState(String queue, double oldestAgeSeconds, String heldBy) {}

  /** How long the oldest open transaction this node can see has held the database's xmin horizon (seconds; 0: none). */
  default void horizonAge(double seconds) {}

  /** Registers the gauge of the wake-up listener's connection. */
  default void bindListener(java.util.function.BooleanSupplier connected) {}

  /** A group (or its queue) no longer exists: its gauges go, rather than keep their last values (an alert that never clears). */
  default void groupGone(String queue, String group) {}

  /** A queue has no retention state any more (deleted, or its retention turned off): its retention gauges go. */
  default void retentionGone(String queue) {}

  /**
   * The queue is gone: every meter tagged with it goes, counters and timers too (a queue created again starts them
   * from zero). Called at once on the node that deleted it, and by the group watch of every other node once the queue
   * has been missing for two of its passes.
   */
  default void queueDeleted(String queue) {}

  /**
   * The group is gone: every meter tagged with the queue and the group goes, as {@link #queueDeleted} (on the deleting
   * node at once, on the others at their group watch's next pass).
   */
  default void groupDeleted(String queue, String group) {}

  /** The queues some meter of this node is tagged with. */
  default java.util.Set<String> queuesMetered() {
    return java.util.Set.of();
  }

  /** The node closes: the gauges it registered go (its counters stay, as counters do). */
  default void close() {}
}
