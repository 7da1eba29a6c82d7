package io.queen;

/** What an acknowledgement did. */
public enum AckOutcome {
  /** Completed; the cursor moved past it (or will, once the messages before it are acknowledged). */
  ACKED,
  /** Failed; it will be redelivered after the queue's retry delay. */
  RETRY_SCHEDULED,
  /** Moved to the dead-letter queue; the cursor moved past it. */
  DEAD_LETTERED,
  /**
   * Rejected: the lease under which it was delivered expired or was taken over by another consumer.
   * Nothing changed; the message will be (or was) redelivered to the lease holder.
   */
  LEASE_LOST,
  /**
   * Not recorded: an earlier message of the same partition and lease failed in the same call, so the
   * lease was released and this message will be redelivered after the failed one.
   */
  REDELIVER
}
