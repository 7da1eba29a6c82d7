package io.queen;

/** What a consumer reports for a message. */
public enum AckStatus {
  /** Done: the cursor may move past it. */
  COMPLETED,
  /** Failed: redeliver after the queue's retry delay, or dead-letter once the retry limit is reached. */
  FAILED,
  /** Give up at once: move it to the dead-letter queue (or drop it when the queue has dead letters off). */
  DEAD_LETTER
}
