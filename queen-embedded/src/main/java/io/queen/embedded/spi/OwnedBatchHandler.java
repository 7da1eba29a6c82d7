package io.queen.embedded.spi;

import io.queen.Message;
import java.util.List;

/**
 * A batch handler that owns its commit and its acknowledgements: the consume loop pops, renews the leases
 * while it runs, and does nothing else but what the handler hands back. The handler acknowledges the
 * messages it is done with ({@link io.queen.Queen#ack(List, io.queen.AckStatus, String)}: {@code COMPLETED},
 * or {@code DEAD_LETTER} for a message it gives up on), or returns them: the loop then acknowledges them as
 * {@code COMPLETED} after the handler returned, together with other acknowledgements and without the
 * worker waiting for it (the leases stay renewed until that commit; a lost or failed acknowledgement only
 * means the messages come again). When it throws, or leaves messages unacknowledged, the loop gives the
 * batch's leases back <em>without counting an attempt</em>, so the messages come again at once: a
 * connector decides for itself what counts as an attempt.
 *
 * <p>While a handler runs, the loop already pops the next batch (one per worker, from the partitions not
 * leased by a running or acknowledging batch), so a connector's pop and acknowledgement overlap its work.
 */
@FunctionalInterface
public interface OwnedBatchHandler {
  /**
   * Handles {@code batch}; returns the messages the loop is to acknowledge as completed (empty when the
   * handler acknowledged, or gives back, all of them itself). Call it only after their effects committed.
   */
  List<Message> handle(List<Message> batch) throws Exception;
}
