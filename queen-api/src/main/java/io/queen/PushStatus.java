package io.queen;

/** What happened to one pushed item. */
public enum PushStatus {
  /** Stored with a new offset. */
  QUEUED,
  /**
   * Not stored: the partition already holds a message with the same transaction id (pushed earlier or
   * earlier in the same batch). The result carries the existing message's id and offset. Queen's own retry of a
   * push whose connection was lost never reports an item as a duplicate of what an earlier try of the same call
   * stored: that item is {@link #QUEUED}, once.
   */
  DUPLICATE
}
