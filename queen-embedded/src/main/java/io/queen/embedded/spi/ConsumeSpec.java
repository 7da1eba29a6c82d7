package io.queen.embedded.spi;

import io.queen.SubscriptionMode;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * What {@link ConnectorHost#consume} reads: a queue, a consumer group, where a new group starts
 * ({@code from} wins over {@code mode} when given), the batch size, the worker count, the lease time
 * (null: the queue's), the threads' role, and whether an expired lease counts as an attempt.
 *
 * <p>{@code expiryCounts} true is the core's rule: a lease that expires, or whose node
 * stopped heartbeating, adds one attempt to the partition's head and dead-letters it past the queue's
 * {@code retryLimit}. False (a sink): the group's expired leases are released without an
 * attempt and never dead-letter anything; the connector counts its own attempts with {@code AckStatus.FAILED}
 * acks of the head (durable, shared by all nodes: the head waits the queue's {@code retryDelay} and comes
 * back alone with {@link io.queen.Message#attempt()} one higher), which for such a group never dead-letter by
 * the queue's {@code retryLimit}, and dead-letters with {@code AckStatus.DEAD_LETTER} at its own limit.
 * The flag is stored on the group before the loop's first pop, and stays there.
 */
public record ConsumeSpec(String queue, String group, SubscriptionMode mode, Instant from, int batch, int workers,
    Duration leaseTime, String threadRole, boolean expiryCounts) {
  public ConsumeSpec {
    Objects.requireNonNull(queue, "queue must not be null");
    Objects.requireNonNull(group, "group must not be null");
    Objects.requireNonNull(mode, "mode must not be null");
    Objects.requireNonNull(threadRole, "threadRole must not be null");
  }

  /** An expired lease counts as an attempt, as for any consumer. */
  public ConsumeSpec(String queue, String group, SubscriptionMode mode, Instant from, int batch, int workers,
      Duration leaseTime, String threadRole) {
    this(queue, group, mode, from, batch, workers, leaseTime, threadRole, true);
  }
}
