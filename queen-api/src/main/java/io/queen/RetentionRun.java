package io.queen;

/**
 * What one retention pass did ({@link Queen#runRetentionNow()}).
 *
 * @param ran false when another node was running retention at that moment (this pass then stopped at once)
 * @param partitions partitions whose oldest message was old enough to be looked at
 * @param removed messages removed
 * @param lost of those, messages some group had not consumed yet ({@code allowDropPastCommitted}), counted once per
 *     group that lost them
 * @param busy partitions with messages old enough to go that pushes held at every try of this pass (the janitor never
 *     waits for a pusher; the next pass takes them)
 * @param emptyPartitionsRemoved partitions removed because they held no message and had had no push for the node's
 *     {@code removeEmptyPartitionsAfter} (their cursors with them; a later push creates such a partition anew, from
 *     offset 0)
 */
public record RetentionRun(boolean ran, long partitions, long removed, long lost, long busy,
    long emptyPartitionsRemoved) {

  /** A run that removed no empty partition. */
  public RetentionRun(boolean ran, long partitions, long removed, long lost, long busy) {
    this(ran, partitions, removed, lost, busy, 0);
  }
}
