package io.queen;

/** Why a KV write did not apply. The set is closed. */
public enum KvReason {
  /** putIfAbsent / once: a live key already exists. */
  EXISTS,
  /** expect on a version, or delete with expect, but the key does not exist (or has expired). */
  ABSENT,
  /** expect: the key exists with another version. */
  VERSION,
  /** incr with max: the increment would exceed the ceiling; nothing was written. */
  LIMIT,
  /** incr: the stored value is not an integer (or the result would not fit in 64 bits). */
  TYPE
}
