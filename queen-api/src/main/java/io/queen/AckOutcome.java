package io.queen;

/**
 * What an acknowledgement did.
 *
 * <p>One rule for repeated acknowledgements: an acknowledgement (any status) of a message the group is
 * already past — its offset is at or below the group's cursor, or the lease it was delivered under already
 * completed it — is {@link #ALREADY_ACKED} and changes nothing, whatever lease it carries. Only otherwise
 * does the lease fence apply ({@link #LEASE_LOST}). So acknowledging twice, or retrying an acknowledgement
 * whose reply was lost with the connection, answers {@code ALREADY_ACKED}, never {@code LEASE_LOST}.
 */
public enum AckOutcome {
  /** Completed; the cursor moved past it (or will, once the messages before it are acknowledged). */
  ACKED,
  /** Failed; it will be redelivered after the queue's retry delay. */
  RETRY_SCHEDULED,
  /** Moved to the dead-letter queue; the cursor moved past it. */
  DEAD_LETTERED,
  /**
   * Rejected, nothing changed: the lease under which the message was delivered is no longer held — it
   * expired, another consumer took it, or it was given up (by a failure acknowledgement of the same
   * lease, a release, {@link Queen#close()}, {@link Subscription#close()} or a seek). The message will be
   * (or was) redelivered. Never the answer for a message that is already acknowledged: that is
   * {@link #ALREADY_ACKED}.
   */
  LEASE_LOST,
  /**
   * Not recorded: an earlier message of the same partition and lease failed in the same call, so the
   * lease was released and this message will be redelivered after the failed one.
   */
  REDELIVER,
  /**
   * Nothing changed because nothing had to: the message was already acknowledged (completed or
   * dead-lettered) for this group, by an earlier call — this consumer's, a retry's, or the consumer that
   * took the partition over — or earlier in the same call. A success; in a
   * {@link Queen#transaction() transaction} it does not roll the bundle back.
   */
  ALREADY_ACKED
}
