package io.queen;

import java.util.UUID;

/**
 * The outcome of one pushed item, in the order of the request.
 *
 * @param index position of the item in the request
 * @param queue the queue
 * @param partition the partition name
 * @param status queued or duplicate
 * @param messageId the stored message's id (for a duplicate: the existing message's id). Ids are made by the
 *     pushing node: version 7 UUIDs (48 bits of Unix milliseconds, a 12-bit sequence, 45 random bits, a 17-bit
 *     rank). The items of one partition in one push are consecutive ids (rank 0, 1, 2, ...); the ids of a later
 *     push from the same JVM are greater; across JVMs they are ordered by millisecond
 * @param offset the message's offset within the partition (for a duplicate: the existing one's)
 * @param transactionId the item's transaction id, never {@code null}: the caller's, or, for an item pushed
 *     without one, the one Queen generated, which is the text of {@code messageId} (lower-case, 36 characters,
 *     e.g. {@code 0193f1c2-5a4e-7b21-8c3d-4e5f60718293}); it is also the stored message's
 *     {@link Message#transactionId()}
 */
public record PushResult(int index, String queue, String partition, PushStatus status, UUID messageId, long offset,
    String transactionId) {
  public boolean isDuplicate() {
    return status == PushStatus.DUPLICATE;
  }
}
