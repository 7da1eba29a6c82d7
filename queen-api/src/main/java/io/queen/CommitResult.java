package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * The outcome of a {@link Transaction}.
 *
 * <p>When {@code success} is false nothing of the bundle was applied, and the lists hold only the result
 * of the operation that failed it: for {@code KV_PRECONDITION} the failing write's {@link KvWriteResult}
 * (its reason tells EXISTS, ABSENT, VERSION, LIMIT or TYPE), for {@code LEASE_LOST} and {@code ALREADY_ACKED}
 * the results of the failing ack call; the other lists are empty.
 *
 * @param success whether the bundle committed (or, with {@code commit(Connection)}, was applied)
 * @param reason why it did not, or {@code null}
 * @param failedOperation index (in the order the bundle was built, one per builder call, counting from 0)
 *     of the operation that failed it, or -1
 * @param value for {@code KV_PRECONDITION}: the winner's current value (or {@code null} if absent)
 * @param version for {@code KV_PRECONDITION}: the winner's current version (0 if absent)
 * @param pushes results of the pushes, in order (index = position among the bundle's pushes)
 * @param acks results of the acks, in order
 * @param writes results of the KV writes, in order (a non-required write that did not apply says why here)
 * @param reads results of the KV reads, in order ({@code getMany} adds one row per key)
 */
public record CommitResult(boolean success, Reason reason, int failedOperation, JsonNode value, long version,
    List<PushResult> pushes, List<AckResult> acks, List<KvWriteResult> writes, List<KvEntry> reads) {

  /** Why a bundle did not commit. */
  public enum Reason {
    /**
     * A required KV write did not apply (lost its precondition, or an incr hit its max or a non-number);
     * {@code value} and {@code version} carry the key's current state: the winner's.
     */
    KV_PRECONDITION,
    /** An ack's lease expired or was taken over: the bundle came from a consumer that no longer owns the message. */
    LEASE_LOST,
    /**
     * An ack answered {@code ALREADY_ACKED} for a message whose lease no longer holds its partition, and the bundle
     * pushes or writes, or is joined to the caller's transaction ({@code commit(Connection)}, whose own work is an
     * effect too): most often a consumer that stalled (a long pause, a frozen host) past its lease while another
     * took the partition over and finished the message, or a bundle committed again after its first commit's outcome
     * was unknown. Its pushes and writes would repeat effects already made, so nothing of the bundle was applied;
     * {@code acks} holds that ack call's results. Under the consumer's own live lease {@code ALREADY_ACKED} stays a
     * success (a message it acknowledged on its own before), as it does in a bundle of acks alone.
     */
    ALREADY_ACKED
  }
}
