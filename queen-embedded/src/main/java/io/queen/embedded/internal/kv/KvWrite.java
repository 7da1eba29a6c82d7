package io.queen.embedded.internal.kv;

import java.util.Objects;

/**
 * One KV write, validated and serialised, ready to be sent: made by {@link KvStore}'s {@code prepare...}
 * methods (which throw {@link IllegalArgumentException} for anything the database would refuse), run by
 * {@link KvStore#write}. Immutable, so a transaction Queen retries can run it again.
 *
 * @param op the operation
 * @param namespace the namespace (checked)
 * @param key the key (checked)
 * @param valueJson the value as JSON text (put, putIfAbsent), or {@code null}
 * @param delta the increment (incr), else 0
 * @param ttlMillis the time to live in milliseconds, or {@code null} for forever (writes other than delete)
 * @param expect the expected version (put, delete), or {@code null}
 * @param max the incr ceiling, or {@code null}
 * @param required inside a bundle: whether a write that does not apply fails the whole bundle
 */
public record KvWrite(Op op, String namespace, String key, String valueJson, long delta, Long ttlMillis, Long expect,
    Long max, boolean required) {

  /** The write operations. */
  public enum Op {
    PUT, PUT_IF_ABSENT, INCR, DELETE
  }

  public KvWrite {
    Objects.requireNonNull(op, "op must not be null");
    Objects.requireNonNull(namespace, "namespace must not be null");
    Objects.requireNonNull(key, "key must not be null");
  }

  /** Whether the write lives forever (never for delete, which has no expiry). */
  public boolean forever() {
    return op != Op.DELETE && ttlMillis == null;
  }
}
