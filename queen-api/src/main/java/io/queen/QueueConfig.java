package io.queen;

import java.time.Duration;
import java.util.Objects;

/**
 * A queue's configuration. Every option is enforced by the broker.
 *
 * @param leaseTime how long a pop holds a partition for its group before another consumer may take it
 *     over (default 30 s); the consume loop renews it while a handler runs
 * @param retryLimit failed deliveries of one message before it is dead-lettered (default 3; 0 = the
 *     first failure dead-letters)
 * @param retryDelay how long a failed message waits before redelivery (default 0)
 * @param deadLetter keep messages that exhausted their retries in the dead-letter queue (default
 *     true); when false they are skipped and only counted
 * @param delayedProcessing a message is not delivered before it is this old (default 0)
 * @param windowBuffer a partition is not delivered until its newest message is this old, so bursts are
 *     delivered together (default 0)
 * @param maxSize the most messages the queue may store; a push beyond it is refused (default 0 =
 *     unbounded)
 */
public record QueueConfig(Duration leaseTime, int retryLimit, Duration retryDelay, boolean deadLetter,
    Duration delayedProcessing, Duration windowBuffer, long maxSize) {

  public static final Duration DEFAULT_LEASE_TIME = Duration.ofSeconds(30);
  public static final int DEFAULT_RETRY_LIMIT = 3;
  public static final QueueConfig DEFAULTS = new QueueConfig(DEFAULT_LEASE_TIME, DEFAULT_RETRY_LIMIT, Duration.ZERO,
      true, Duration.ZERO, Duration.ZERO, 0);

  public QueueConfig {
    positive("leaseTime", leaseTime, Duration.ofMillis(100), Duration.ofDays(1));
    if (retryLimit < 0 || retryLimit > 1000) {
      throw new IllegalArgumentException("retryLimit must be 0..1000, was " + retryLimit);
    }
    positive("retryDelay", retryDelay, Duration.ZERO, Duration.ofDays(7));
    positive("delayedProcessing", delayedProcessing, Duration.ZERO, Duration.ofDays(7));
    positive("windowBuffer", windowBuffer, Duration.ZERO, Duration.ofDays(1));
    if (maxSize < 0) {
      throw new IllegalArgumentException("maxSize must be >= 0 (0 = unbounded), was " + maxSize);
    }
  }

  private static void positive(String field, Duration d, Duration min, Duration max) {
    Objects.requireNonNull(d, field);
    if (d.compareTo(min) < 0 || d.compareTo(max) > 0) {
      throw new IllegalArgumentException(field + " must be between " + min + " and " + max + ", was " + d);
    }
  }

  /** A builder starting from these values. */
  public Builder toBuilder() {
    return new Builder(this);
  }

  /** Mutable builder used by {@link QueueClient#configure}; not thread-safe. */
  public static final class Builder {
    private Duration leaseTime;
    private int retryLimit;
    private Duration retryDelay;
    private boolean deadLetter;
    private Duration delayedProcessing;
    private Duration windowBuffer;
    private long maxSize;

    Builder(QueueConfig c) {
      leaseTime = c.leaseTime;
      retryLimit = c.retryLimit;
      retryDelay = c.retryDelay;
      deadLetter = c.deadLetter;
      delayedProcessing = c.delayedProcessing;
      windowBuffer = c.windowBuffer;
      maxSize = c.maxSize;
    }

    public Builder leaseTime(Duration v) {
      leaseTime = v;
      return this;
    }

    public Builder retryLimit(int v) {
      retryLimit = v;
      return this;
    }

    public Builder retryDelay(Duration v) {
      retryDelay = v;
      return this;
    }

    public Builder deadLetter(boolean v) {
      deadLetter = v;
      return this;
    }

    public Builder delayedProcessing(Duration v) {
      delayedProcessing = v;
      return this;
    }

    public Builder windowBuffer(Duration v) {
      windowBuffer = v;
      return this;
    }

    public Builder maxSize(long v) {
      maxSize = v;
      return this;
    }

    /** Validates and returns the configuration. */
    public QueueConfig build() {
      return new QueueConfig(leaseTime, retryLimit, retryDelay, deadLetter, delayedProcessing, windowBuffer, maxSize);
    }
  }
}
