package io.queen.embedded.spi;

import io.queen.SubscriptionMode;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * What {@link ConnectorHost#consume} reads: a queue, a consumer group, where a new group starts
 * ({@code from} wins over {@code mode} when given), the batch size, the worker count and the lease time
 * (null: the queue's).
 */
public record ConsumeSpec(String queue, String group, SubscriptionMode mode, Instant from, int batch, int workers,
    Duration leaseTime, String threadRole) {
  public ConsumeSpec {
    Objects.requireNonNull(queue, "queue");
    Objects.requireNonNull(group, "group");
    Objects.requireNonNull(mode, "mode");
    Objects.requireNonNull(threadRole, "threadRole");
  }
}
