package io.queen;

import java.time.Duration;

/**
 * A running consumer: worker threads that pop, run the handler, and acknowledge.
 *
 * <p>Thread-safe. {@link #close()} is idempotent: it stops popping, waits for running handlers up to
 * the grace period (the builder's, 10 s by default), interrupts the ones still running, and releases the
 * leases its workers hold so another consumer can take the partitions at once. Called from one of the
 * subscription's own handlers, it returns at once and the close goes on once that handler has returned (its
 * message is acknowledged as usual).
 */
public interface Subscription extends AutoCloseable {
  String queue();

  String group();

  /** True until {@link #close()} has started. */
  boolean isRunning();

  /**
   * True while this subscription's queue does not exist: it did not when the subscription started, and no check
   * since has found it. A pop of an unknown queue returns nothing and creates nothing, so a consumer of a misspelt
   * queue name would otherwise just wait; it also says so once at WARN. Checked at most once per poll interval,
   * after pops that found nothing; false from the first check that finds the queue, or the first messages popped.
   */
  boolean queueMissing();

  /**
   * Handler runs that returned normally, since start, counted per message. A transactional batch whose bundle
   * found some markers already there is run again message by message (so that only the new ones apply), and those
   * messages are counted once per run: for batch handlers this can exceed the messages delivered. The outcomes are
   * {@link #acked()}, {@link #alreadyDone()}, {@link #failed()}, {@link #deadLettered()} and {@link #leaseLost()}.
   */
  long handled();

  /** Messages whose handler threw (or whose bundle lost a required write other than a marker), since start. */
  long failed();

  /**
   * Messages this subscription completed: acknowledged, or committed with their bundle. Not counted here:
   * {@link #alreadyDone()} (acknowledged without their bundle) and {@link #deadLettered()}.
   *
   * <p>A plain handler's acknowledgements are committed by the subscription's acker thread a moment after
   * the handler returns, so right after a handler returned this can read lower than {@link #handled()}; a
   * test that checks it should wait for it (for example with Awaitility) rather than read it once. After
   * {@link #close()} returns, every acknowledgement has been counted.
   */
  long acked();

  /**
   * Messages of a transactional handler whose marker was already there ({@code KV_PRECONDITION} with
   * {@code EXISTS}): done before, acknowledged without applying the bundle again.
   */
  long alreadyDone();

  /** Messages moved to the dead-letter queue by this subscription's acknowledgements. */
  long deadLettered();

  /**
   * Messages this subscription could not acknowledge because its lease had expired or been taken over
   * (another consumer has them now); not counted as failures.
   */
  long leaseLost();

  @Override
  void close();

  /**
   * Closes with a specific grace period for running handlers, between zero (interrupt them at once) and 10
   * minutes, as {@link ConsumerBuilder#gracePeriod(Duration)}. Past it, what {@link Queen#close()} says of
   * handlers still running holds here too: they are interrupted, transactional handlers' connections are aborted,
   * the call returns about half a second later at most, and the leases are given back.
   *
   * @throws IllegalArgumentException if {@code grace} is negative or longer than 10 minutes (nothing is closed)
   */
  void close(Duration grace);
}
