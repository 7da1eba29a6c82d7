package io.queen.embedded.spi;

import io.queen.Message;
import java.util.List;

/**
 * A batch handler that owns its commit and its acknowledgements: the consume loop pops, renews the leases
 * while it runs, and does nothing else. The handler acknowledges every message it is done with itself
 * ({@link io.queen.Queen#ack(List, io.queen.AckStatus, String)}: {@code COMPLETED}, or {@code DEAD_LETTER}
 * for a message it gives up on). When it throws, or leaves messages unacknowledged, the loop gives the
 * batch's leases back <em>without counting an attempt</em>, so the messages come again at once: a
 * connector decides for itself what counts as an attempt.
 */
@FunctionalInterface
public interface OwnedBatchHandler {
  void handle(List<Message> batch) throws Exception;
}
