package io.queen;

import java.util.Objects;

/**
 * One message to push: its partition, payload and optional transaction id (de-duplication key within
 * the partition) and trace id. Immutable; the {@code with}-style methods return copies.
 *
 * <p>The payload is any Jackson-serialisable object, a {@code JsonNode}, or a {@link Json} wrapper
 * around JSON text. A plain {@code String} is serialised as a JSON string; one that holds the JSON text of an
 * object or array is refused at the push (wrap it in {@link Json#of}, or pass a {@code TextNode} to really store
 * such text as a string).
 *
 * @param queue the queue, or {@code null} to use the queue of the call that pushes it
 * @param partition the partition name ({@link Queen#DEFAULT_PARTITION} when created with {@link #of(Object)})
 * @param payload the payload
 * @param transactionId a de-duplication key unique within the partition, or {@code null}: Queen then gives the
 *     stored message a transaction id of its own, the text of the message's id (a UUIDv7, see
 *     {@link PushResult#transactionId()}); a copy of this item carrying that id is what to push again after a
 *     {@link PushOutcomeUnknownException} ({@link PushOutcomeUnknownException#items()})
 * @param traceId a caller-chosen trace id stored with the message, or {@code null}
 */
public record PushItem(String queue, String partition, Object payload, String transactionId, String traceId) {

  public PushItem {
    if (queue != null) {
      Names.queue(queue);
    }
    Names.partition(Objects.requireNonNull(partition, "partition must not be null"));
    Objects.requireNonNull(payload, "payload (use a JSON null node to push null)");
    if (transactionId != null && (transactionId.isEmpty() || transactionId.length() > 256)) {
      throw new IllegalArgumentException("transactionId must be 1..256 characters, was " + transactionId.length());
    }
    if (transactionId != null && transactionId.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("transactionId must not contain the NUL character (\\u0000), at index "
          + transactionId.indexOf('\0'));
    }
    if (traceId != null && traceId.length() > 256) {
      throw new IllegalArgumentException("traceId must be at most 256 characters, was " + traceId.length());
    }
    if (traceId != null && traceId.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("traceId must not contain the NUL character (\\u0000), at index "
          + traceId.indexOf('\0'));
    }
  }

  /** A message for the default partition of the pushing queue. */
  public static PushItem of(Object payload) {
    return new PushItem(null, Queen.DEFAULT_PARTITION, payload, null, null);
  }

  /** A message for the given partition of the pushing queue. */
  public static PushItem of(String partition, Object payload) {
    return new PushItem(null, partition, payload, null, null);
  }

  /** A message for the given queue and partition (for batches that span queues). */
  public static PushItem to(String queue, String partition, Object payload) {
    return new PushItem(Objects.requireNonNull(queue, "queue must not be null"), partition, payload, null, null);
  }

  public PushItem transactionId(String id) {
    return new PushItem(queue, partition, payload, id, traceId);
  }

  public PushItem traceId(String id) {
    return new PushItem(queue, partition, payload, transactionId, id);
  }

  public PushItem queue(String q) {
    return new PushItem(q, partition, payload, transactionId, traceId);
  }
}
