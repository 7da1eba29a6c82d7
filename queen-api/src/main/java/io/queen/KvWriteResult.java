package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;

/**
 * The answer to a KV write: whether it applied, and the key's current state either way, so the loser
 * of a race needs no second round trip.
 *
 * @param key the key
 * @param applied whether the write took effect
 * @param reason why it did not apply, or {@code null} when it applied
 * @param found whether a live key exists now (after the write)
 * @param value the current value, or {@code null} when none
 * @param version the current version, or 0 when none
 * @param expiresAt the current expiry, or {@code null}
 */
public record KvWriteResult(String key, boolean applied, KvReason reason, boolean found, JsonNode value, long version,
    Instant expiresAt) {

  /**
   * The current value as a 64-bit integer (for {@code incr}).
   *
   * @throws ArithmeticException if the value is not an integer that fits in 64 bits
   */
  public long longValue() {
    if (value == null || !value.isIntegralNumber() || !value.canConvertToLong()) {
      throw new ArithmeticException("value of '" + key + "' is not a 64-bit integer: "
          + (value == null ? "absent" : value.getNodeType()));
    }
    return value.longValue();
  }
}
