package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Objects;

/**
 * One change event on its way into Queen: the queue of its table, the partition named after its key (or
 * {@code partitionBy}), the message id used as the push's transactionId (so a resend is a duplicate, never a
 * second message), and the seed's event object.
 */
public record SourceEvent(String queue, String partition, String transactionId, ObjectNode payload) {
  public SourceEvent {
    Objects.requireNonNull(queue, "queue must not be null");
    Objects.requireNonNull(partition, "partition must not be null");
    Objects.requireNonNull(transactionId, "transactionId must not be null");
    Objects.requireNonNull(payload, "payload must not be null");
  }
}
