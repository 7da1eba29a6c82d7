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
 * @param retention messages older than this are removed by the janitor once every consumer group's cursor
 *     has passed them (default {@link Duration#ZERO} = keep forever); 1 s .. 3650 days
 * @param completedRetention messages every group has passed are removed once they are this old, even when
 *     younger than {@code retention} (default zero = off); shorter than {@code retention} when both are set
 * @param allowDropPastCommitted when true, age wins: messages older than {@code retention} are removed
 *     even when a group has not consumed them; those groups' losses are counted and shown (default
 *     false); needs {@code retention}
 * @param pendingAlertAfter a group whose oldest pending message is older than this is in alarm (logged
 *     once at WARN, a gauge); strictly shorter than {@code retention} when that is set (default zero = no
 *     alarm)
 * @param encryption payloads are stored encrypted (AES-256-GCM under the node's key, with the key's id per
 *     message) and decrypted on delivery; a node without the key refuses to push to or pop from the queue, and a
 *     pop leases no partition whose next message is sealed under a key the node lacks (those wait, counted in
 *     {@link Status.QueueStatus#waitingForKey()}). A node seals only under a key the cluster has adopted (the
 *     embedded builder's {@code adoptEncryptionKey()}). Default false. Switching it on seals what is pushed from
 *     then on; what is stored stays as it is.
 */
public record QueueConfig(Duration leaseTime, int retryLimit, Duration retryDelay, boolean deadLetter,
    Duration delayedProcessing, Duration windowBuffer, long maxSize, Duration retention, Duration completedRetention,
    boolean allowDropPastCommitted, Duration pendingAlertAfter, boolean encryption) {

  public static final Duration DEFAULT_LEASE_TIME = Duration.ofSeconds(30);
  public static final int DEFAULT_RETRY_LIMIT = 3;
  public static final QueueConfig DEFAULTS = new QueueConfig(DEFAULT_LEASE_TIME, DEFAULT_RETRY_LIMIT, Duration.ZERO,
      true, Duration.ZERO, Duration.ZERO, 0);
  /** The longest {@code retention}, {@code completedRetention} or {@code pendingAlertAfter}: 3650 days. */
  public static final Duration MAX_RETENTION = Duration.ofDays(3650);

  /** A configuration without encryption. */
  public QueueConfig(Duration leaseTime, int retryLimit, Duration retryDelay, boolean deadLetter,
      Duration delayedProcessing, Duration windowBuffer, long maxSize, Duration retention, Duration completedRetention,
      boolean allowDropPastCommitted, Duration pendingAlertAfter) {
    this(leaseTime, retryLimit, retryDelay, deadLetter, delayedProcessing, windowBuffer, maxSize, retention,
        completedRetention, allowDropPastCommitted, pendingAlertAfter, false);
  }

  /** A configuration without retention, without a lag alarm and without encryption. */
  public QueueConfig(Duration leaseTime, int retryLimit, Duration retryDelay, boolean deadLetter,
      Duration delayedProcessing, Duration windowBuffer, long maxSize) {
    this(leaseTime, retryLimit, retryDelay, deadLetter, delayedProcessing, windowBuffer, maxSize, Duration.ZERO,
        Duration.ZERO, false, Duration.ZERO, false);
  }

  public QueueConfig {
    // every problem at once, as the node's builder reports them: one call of configure(...) fixes them all
    java.util.List<String> errors = new java.util.ArrayList<>();
    positive(errors, "leaseTime", leaseTime, Duration.ofMillis(100), Duration.ofDays(1));
    if (retryLimit < 0 || retryLimit > 1000) {
      errors.add("retryLimit must be 0..1000, was " + retryLimit);
    }
    positive(errors, "retryDelay", retryDelay, Duration.ZERO, Duration.ofDays(7));
    positive(errors, "delayedProcessing", delayedProcessing, Duration.ZERO, Duration.ofDays(7));
    positive(errors, "windowBuffer", windowBuffer, Duration.ZERO, Duration.ofDays(1));
    if (maxSize < 0) {
      errors.add("maxSize must be >= 0 (0 = unbounded), was " + maxSize);
    }
    optional(errors, "retention", retention);
    optional(errors, "completedRetention", completedRetention);
    optional(errors, "pendingAlertAfter", pendingAlertAfter);
    boolean kept = !retention.isZero();
    if (kept && !completedRetention.isZero() && completedRetention.compareTo(retention) >= 0) {
      errors.add("completedRetention must be shorter than retention (" + retention + "), was " + completedRetention
          + ": messages older than retention go anyway once every group passed them");
    }
    if (allowDropPastCommitted && !kept) {
      errors.add("allowDropPastCommitted needs retention (it lets retention remove what a group has not consumed);"
          + " set retention or leave allowDropPastCommitted false");
    }
    if (kept && !pendingAlertAfter.isZero() && pendingAlertAfter.compareTo(retention) >= 0) {
      errors.add("pendingAlertAfter must be shorter than retention (" + retention + "), was " + pendingAlertAfter
          + ": the alarm has to fire while a lagging group's messages are still kept");
    }
    if (!errors.isEmpty()) {
      throw new IllegalArgumentException(errors.size() == 1 ? errors.get(0)
          : errors.size() + " invalid options: " + String.join("; ", errors));
    }
  }

  private static void optional(java.util.List<String> errors, String field, Duration d) {
    Objects.requireNonNull(d, field + " must not be null");
    if (!d.isZero() && (d.compareTo(Duration.ofSeconds(1)) < 0 || d.compareTo(MAX_RETENTION) > 0)) {
      errors.add(field + " must be 0 (off) or between PT1S and " + MAX_RETENTION + ", was " + d);
    }
  }

  private static void positive(java.util.List<String> errors, String field, Duration d, Duration min, Duration max) {
    Objects.requireNonNull(d, field + " must not be null");
    if (d.compareTo(min) < 0 || d.compareTo(max) > 0) {
      errors.add(field + " must be between " + min + " and " + max + ", was " + d);
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
    private Duration retention;
    private Duration completedRetention;
    private boolean allowDropPastCommitted;
    private Duration pendingAlertAfter;
    private boolean encryption;

    Builder(QueueConfig c) {
      leaseTime = c.leaseTime;
      retryLimit = c.retryLimit;
      retryDelay = c.retryDelay;
      deadLetter = c.deadLetter;
      delayedProcessing = c.delayedProcessing;
      windowBuffer = c.windowBuffer;
      maxSize = c.maxSize;
      retention = c.retention;
      completedRetention = c.completedRetention;
      allowDropPastCommitted = c.allowDropPastCommitted;
      pendingAlertAfter = c.pendingAlertAfter;
      encryption = c.encryption;
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

    /** Messages older than this may be removed once every group has passed them; zero keeps them forever. */
    public Builder retention(Duration v) {
      retention = v;
      return this;
    }

    /** Messages every group has passed may be removed once this old; zero = off. */
    public Builder completedRetention(Duration v) {
      completedRetention = v;
      return this;
    }

    /** Let retention remove messages a group has not consumed yet (counted as that group's loss). */
    public Builder allowDropPastCommitted(boolean v) {
      allowDropPastCommitted = v;
      return this;
    }

    /** The lag alarm: a group's oldest pending message older than this; zero = no alarm. */
    public Builder pendingAlertAfter(Duration v) {
      pendingAlertAfter = v;
      return this;
    }

    /**
     * Store payloads encrypted with AES-256-GCM under the node's key ({@code encryptionKey} /
     * {@code QUEEN_ENCRYPTION_KEY}); every node that pushes or pops needs the key, and the cluster must have
     * adopted it (the embedded builder's {@code adoptEncryptionKey()}).
     */
    public Builder encryption(boolean v) {
      encryption = v;
      return this;
    }

    /** Validates and returns the configuration. */
    public QueueConfig build() {
      return new QueueConfig(leaseTime, retryLimit, retryDelay, deadLetter, delayedProcessing, windowBuffer, maxSize,
          retention, completedRetention, allowDropPastCommitted, pendingAlertAfter, encryption);
    }
  }
}
