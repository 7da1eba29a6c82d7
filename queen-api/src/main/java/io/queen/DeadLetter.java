package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.UUID;

/**
 * A message that exhausted its retries (or was acknowledged as {@link AckStatus#DEAD_LETTER}) for a
 * consumer group. The message itself stays in its partition; this row points at it.
 *
 * <p>A payload this node cannot decode (stored by hand through SQL, or beyond the reader's limits)
 * does not break the page it is listed in: that entry has {@code payload} {@code null} and says why in
 * {@code payloadError}; its {@code payloadBytes} are still reported.
 *
 * @param id the dead-letter row's id (the keyset cursor of {@link DeadLetters.Query#list})
 * @param payload the payload, or {@code null} when it could not be decoded or the message is no longer stored
 * @param payloadError why the payload could not be decoded (never the payload itself), or {@code null}
 * @param payloadBytes the size of the stored payload as JSON text in UTF-8, or 0 when the message is no longer stored
 * @param error the failure recorded by the last attempt (the handler's error, or Queen's reason)
 */
public record DeadLetter(long id, String queue, String partition, long partitionId, long offset, String group,
    UUID messageId, JsonNode payload, String payloadError, long payloadBytes, String error, int attempts,
    Instant failedAt) {

  /** Where it is and why, never the payload (a dead letter is logged more often than any other record). */
  @Override
  public String toString() {
    return "DeadLetter[id=" + id + " queue=" + queue + " partition=" + partition + " offset=" + offset + " group="
        + (Queen.DEFAULT_GROUP.equals(group) ? "(default)" : group) + " attempts=" + attempts + " failedAt=" + failedAt
        + " payloadBytes=" + payloadBytes + "]";
  }
}
