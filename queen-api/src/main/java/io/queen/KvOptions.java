package io.queen;

import java.time.Duration;
import java.util.Objects;

/**
 * How a KV write behaves: its expiry (exactly one of a TTL above zero or forever, always), and
 * optionally an expected version, a ceiling for {@code incr}, and whether a lost precondition fails the
 * whole {@link Transaction}. Immutable; start from {@link Kv#ttl(Duration)} or {@link Kv#forever()}.
 *
 */
public final class KvOptions {
  private final Duration ttl;
  private final boolean forever;
  private final Long expectVersion;
  private final Long max;
  private final boolean required;

  KvOptions(Duration ttl, boolean forever, Long expectVersion, Long max, boolean required) {
    if (forever && ttl != null) {
      throw new IllegalArgumentException("expiry: give exactly one of ttl or forever, not both");
    }
    if (!forever && ttl == null) {
      throw new IllegalArgumentException("expiry: every write needs exactly one of ttl (> 0) or forever");
    }
    if (ttl != null && (ttl.isNegative() || ttl.isZero())) {
      throw new IllegalArgumentException("ttl must be above zero, was " + ttl);
    }
    if (ttl != null && ttl.toMillis() < 1) {
      throw new IllegalArgumentException("ttl must be at least 1 ms, was " + ttl);
    }
    if (expectVersion != null && expectVersion < 0) {
      throw new IllegalArgumentException("expect version must be >= 0 (0 = absent), was " + expectVersion);
    }
    this.ttl = ttl;
    this.forever = forever;
    this.expectVersion = expectVersion;
    this.max = max;
    this.required = required;
  }

  /** The time to live, or {@code null} when the write lives forever. */
  public Duration ttl() {
    return ttl;
  }

  public boolean isForever() {
    return forever;
  }

  /** The expected version (0 = absent), or {@code null}. */
  public Long expectVersion() {
    return expectVersion;
  }

  /** The incr ceiling, or {@code null}. */
  public Long max() {
    return max;
  }

  public boolean isRequired() {
    return required;
  }

  @Override
  public String toString() {
    return "KvOptions[" + (forever ? "forever" : "ttl=" + ttl) + (expectVersion == null ? "" : ", expect=" + expectVersion)
        + (max == null ? "" : ", max=" + max) + (required ? ", required" : "") + "]";
  }

  /** Applies only if the key's current version is {@code version}; 0 means the key must be absent. */
  public KvOptions expect(long version) {
    return new KvOptions(ttl, forever, version, max, required);
  }

  /** For {@code incr}: refuse (reason {@code LIMIT}) an increment that would take the value above {@code max}. */
  public KvOptions max(long ceiling) {
    return new KvOptions(ttl, forever, expectVersion, ceiling, required);
  }

  /** Inside a transaction: a lost precondition rolls back the whole bundle ({@code KV_PRECONDITION}). */
  public KvOptions required() {
    return new KvOptions(ttl, forever, expectVersion, max, true);
  }

  static KvOptions ofForever() {
    return new KvOptions(null, true, null, null, false);
  }

  static KvOptions ofTtl(Duration ttl) {
    Objects.requireNonNull(ttl, "ttl must not be null");
    return new KvOptions(ttl, false, null, null, false);
  }
}
