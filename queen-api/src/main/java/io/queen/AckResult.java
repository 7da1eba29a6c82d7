package io.queen;

/**
 * The outcome of acknowledging one message. See {@link AckOutcome} for the rule that decides between
 * {@link AckOutcome#ALREADY_ACKED} and {@link AckOutcome#LEASE_LOST}.
 *
 * @param partitionId the partition's id
 * @param offset the message's offset
 * @param outcome what happened
 */
public record AckResult(long partitionId, long offset, AckOutcome outcome) {
  /**
   * True unless the lease was lost or the acknowledgement was not recorded ({@link AckOutcome#LEASE_LOST},
   * {@link AckOutcome#REDELIVER}); {@link AckOutcome#ALREADY_ACKED} is a success.
   */
  public boolean success() {
    return outcome != AckOutcome.LEASE_LOST && outcome != AckOutcome.REDELIVER;
  }
}
