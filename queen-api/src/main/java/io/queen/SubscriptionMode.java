package io.queen;

/** Where a consumer group that Queen has not seen before starts reading. */
public enum SubscriptionMode {
  /** Only messages pushed after the group subscribed (the default for named groups). */
  NEW,
  /** Everything still stored, from the beginning of each partition. */
  ALL
}
