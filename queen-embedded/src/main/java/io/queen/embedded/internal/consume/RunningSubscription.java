package io.queen.embedded.internal.consume;

import io.queen.Subscription;

/**
 * A started subscription as the node that closes it sees it ({@link ConsumerNode#register}): the node's close stops
 * every subscription taking work first, then lets their handlers share one grace period.
 */
public interface RunningSubscription extends Subscription {

  /** Whether the calling thread is one of this subscription's workers or its claimer. */
  boolean onOwnThread();

  /**
   * The first half of a close: no more pops, and every worker stops after the unit it runs. Returns false when the
   * subscription was closing already.
   */
  boolean beginClose();

  /**
   * The second half: waits for the claimer and the workers until {@code deadline} ({@link System#nanoTime()}),
   * interrupts what still runs, and gives back every lease left.
   */
  void finishClose(long deadline);
}
