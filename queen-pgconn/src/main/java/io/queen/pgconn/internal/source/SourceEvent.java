package io.queen.pgconn.internal.source;

import java.util.List;
import java.util.Objects;

/**
 * One change event on its way into Queen: the queue of its table, the partition named after its key (or
 * {@code partitionBy}), the message id used as the push's transactionId (so a resend is a duplicate, never a
 * second message), the event's op and unchanged TOASTed columns, and the change event object as JSON text.
 */
public record SourceEvent(String queue, String partition, String transactionId, char op, List<String> unchanged,
    String json) {
  public SourceEvent {
    Objects.requireNonNull(queue, "queue must not be null");
    Objects.requireNonNull(partition, "partition must not be null");
    Objects.requireNonNull(transactionId, "transactionId must not be null");
    Objects.requireNonNull(unchanged, "unchanged must not be null");
    Objects.requireNonNull(json, "json must not be null");
  }

  SourceEvent(String queue, String partition, String transactionId, ChangeEvents.Event event) {
    this(queue, partition, transactionId, event.op(), event.unchanged(), event.json());
  }
}
