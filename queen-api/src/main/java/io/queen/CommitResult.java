package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * The outcome of a {@link Transaction}.
 *
 * @param success whether the bundle committed (or, with {@code commit(Connection)}, was applied)
 * @param reason why it did not, or {@code null}
 * @param failedOperation index (in the order the bundle was built) of the operation that failed it, or -1
 * @param value for {@code KV_PRECONDITION}: the winner's current value (or {@code null} if absent)
 * @param version for {@code KV_PRECONDITION}: the winner's current version (0 if absent)
 * @param pushes results of the pushes, in order (empty when not successful)
 * @param acks results of the acks, in order
 * @param writes results of the KV writes, in order
 * @param reads results of the KV reads, in order
 */
public record CommitResult(boolean success, Reason reason, int failedOperation, JsonNode value, long version,
    List<PushResult> pushes, List<AckResult> acks, List<KvWriteResult> writes, List<KvEntry> reads) {

  /** Why a bundle did not commit. */
  public enum Reason {
    /** A required KV write lost its precondition; {@code value} and {@code version} carry the winner's. */
    KV_PRECONDITION,
    /** An ack's lease expired or was taken over: the bundle came from a consumer that no longer owns the message. */
    LEASE_LOST
  }
}
