package io.queen;

/** Why a KV write did not apply. The set is closed. */
public enum KvReason {
  /** putIfAbsent / once, or put with {@code expect(0)}: a live key already exists. */
  EXISTS,
  /**
   * put with {@code expect(version > 0)}, or delete: the key does not exist (or has expired). Nothing was
   * created: a conditional write that matches nothing creates nothing.
   */
  ABSENT,
  /** expect: the key exists with another version. */
  VERSION,
  /** incr with max: the increment would exceed the ceiling; nothing was written. */
  LIMIT,
  /** incr: the stored value is not an integer (or the result would not fit in 64 bits). */
  TYPE
}
