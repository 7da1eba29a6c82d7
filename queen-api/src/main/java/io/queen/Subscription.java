package io.queen;

import java.time.Duration;

/**
 * A running consumer: worker threads that pop, run the handler, and acknowledge.
 *
 * <p>Thread-safe. {@link #close()} is idempotent: it stops popping, waits for running handlers up to
 * the grace period (the builder's, 10 s by default), interrupts the ones still running, and releases the
 * leases its workers hold so another consumer can take the partitions at once.
 */
public interface Subscription extends AutoCloseable {
  String queue();

  String group();

  /** True until {@link #close()} has started. */
  boolean isRunning();

  /** Messages whose handler returned normally, since start. */
  long handled();

  /** Messages whose handler threw, since start. */
  long failed();

  @Override
  void close();

  /** Closes with a specific grace period for running handlers. */
  void close(Duration grace);
}
