package io.queen.embedded.internal;

import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushResult;
import java.util.List;

/**
 * What the broker reports as it works. The default does nothing; {@link MicrometerMetrics} is used when
 * the application gives a Micrometer {@code MeterRegistry} (micrometer-core is an optional dependency,
 * loaded only then). Tags are low-cardinality: queue, group — never partition or message id.
 */
public interface Metrics {
  Metrics NOOP = new Metrics() {};

  default void pushed(List<PushResult> results) {}

  default void delivered(String queue, String group, List<Message> messages) {}

  default void acked(String queue, String group, List<AckResult> results) {}

  default void handled(String queue, String group, long nanos, boolean ok) {}

  /**
   * A subscription settled messages: {@code outcome} is acked, already_done, failed, dead_lettered or
   * lease_lost (the counts of {@link io.queen.Subscription}).
   */
  default void consumerOutcome(String queue, String group, String outcome, long n) {}

  /** The consume loop popped: {@code empty} when the pop found nothing. */
  default void consumerPop(String queue, String group, boolean empty) {}

  /** A message was moved to the dead-letter queue (or dropped, with deadLetter off), by an ack or an expired lease. */
  default void deadLettered(String queue, String group) {}

  /**
   * A bundle of markers then acks went as one statement ({@code applied}), or met a key that had a row or a lost lease
   * and went the general way ({@code false}).
   */
  default void markerStatement(boolean applied) {}

  /** Starts the gauges (lag, pending age) refreshed from status snapshots; returns nothing to stop. */
  default void bindStatus(QueenImpl queen) {}
}
