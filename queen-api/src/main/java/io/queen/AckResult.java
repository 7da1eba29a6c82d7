package io.queen;

/**
 * The outcome of acknowledging one message.
 *
 * @param partitionId the partition's id
 * @param offset the message's offset
 * @param outcome what happened
 */
public record AckResult(long partitionId, long offset, AckOutcome outcome) {
  /** True unless the lease was lost or the acknowledgement was not recorded. */
  public boolean success() {
    return outcome != AckOutcome.LEASE_LOST && outcome != AckOutcome.REDELIVER;
  }
}
