package io.queen;

import java.time.Duration;
import java.util.Collection;
import java.util.List;

/**
 * The transactional key/value store, in the same PostgreSQL as the queues, so a write can commit in one
 * transaction with a push and an ack ({@link Queen#transaction()}). Each call here is its own
 * transaction. Values are JSON (any Jackson-serialisable object); nothing is cached.
 *
 * <p>Every write carries exactly one of a TTL above zero or forever ({@link #ttl}, {@link #forever}).
 * An expired key is never returned and never counts as existing, even before the sweeper removes it.
 * Keys are at most 512 bytes, values at most 64 KiB; namespaces match {@link Names#NAMESPACE_RULE} and
 * exist only while they hold keys (an unknown namespace reads empty).
 *
 * <p>Thread-safe.
 */
public interface Kv {
  /** Default and largest page of {@link #getPrefix}: {@value}. */
  int MAX_PAGE = 1000;

  /** A write that expires {@code ttl} after it is made (database clock). */
  static KvOptions ttl(Duration ttl) {
    return KvOptions.ofTtl(ttl);
  }

  /** A write that never expires. */
  static KvOptions forever() {
    return KvOptions.ofForever();
  }

  KvEntry get(String namespace, String key);

  /**
   * One row per requested key, in request order (never a map: absent and null stay distinct); at most
   * {@value #MAX_PAGE} keys.
   */
  List<KvEntry> getMany(String namespace, Collection<String> keys);

  /**
   * Keys starting with {@code prefix} (required, non-empty), after {@code after} (exclusive, or
   * {@code null}), at most {@code limit} (clamped to 1..{@value #MAX_PAGE}) and at most the byte ceiling.
   */
  KvPage getPrefix(String namespace, String prefix, String after, int limit);

  /**
   * Writes the value ({@code null} stores a JSON null) with the options' expiry, never the previous one.
   * With {@code expect(v)}: only if the live key has version {@code v} ({@code VERSION} otherwise,
   * {@code ABSENT} when there is none, and then nothing is created); {@code expect(0)}: only if absent
   * ({@code EXISTS} otherwise).
   */
  KvWriteResult put(String namespace, String key, Object value, KvOptions options);

  /** Writes the value only if no live key exists (reason {@code EXISTS} otherwise). */
  KvWriteResult putIfAbsent(String namespace, String key, Object value, KvOptions options);

  /** An idempotency marker: {@link #putIfAbsent} of {@code true}. */
  default KvWriteResult once(String namespace, String key, KvOptions options) {
    return putIfAbsent(namespace, key, Boolean.TRUE, options);
  }

  /**
   * Adds {@code delta} to a numeric key (absent or expired counts as 0). With {@code max}: refused with
   * reason {@code LIMIT} when the result would exceed it, and nothing is written. The expiry applies only
   * when the key is created; a live key keeps the expiry it was born with. {@code expect} is not allowed.
   */
  KvWriteResult incr(String namespace, String key, long delta, KvOptions options);

  /** Deletes the key. Applied=false with {@code ABSENT} when no live key existed. */
  KvWriteResult delete(String namespace, String key);

  /** Deletes the key only if its version is {@code expectVersion}. */
  KvWriteResult delete(String namespace, String key, long expectVersion);
}
