package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.UUID;

/**
 * A message that exhausted its retries (or was acknowledged as {@link AckStatus#DEAD_LETTER}) for a
 * consumer group. The message itself stays in its partition; this row points at it.
 *
 * @param id the dead-letter row's id (the keyset cursor of {@link DeadLetters.Query#list})
 */
public record DeadLetter(long id, String queue, String partition, long partitionId, long offset, String group,
    UUID messageId, JsonNode payload, String error, int attempts, Instant failedAt) {}
