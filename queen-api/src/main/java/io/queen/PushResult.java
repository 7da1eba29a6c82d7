package io.queen;

import java.util.UUID;

/**
 * The outcome of one pushed item, in the order of the request.
 *
 * @param index position of the item in the request
 * @param queue the queue
 * @param partition the partition name
 * @param status queued or duplicate
 * @param messageId the stored message's id (for a duplicate: the existing message's id)
 * @param offset the message's offset within the partition (for a duplicate: the existing one's)
 * @param transactionId the item's transaction id, or {@code null}
 */
public record PushResult(int index, String queue, String partition, PushStatus status, UUID messageId, long offset,
    String transactionId) {
  public boolean isDuplicate() {
    return status == PushStatus.DUPLICATE;
  }
}
