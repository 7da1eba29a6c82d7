package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Instant;
import java.util.Objects;
import java.util.UUID;

/**
 * A delivered message. Immutable and safe to pass between threads.
 *
 * <p>Besides its content it carries what an acknowledgement needs: the partition id, the offset, the
 * consumer group and the lease id under which it was delivered. Acknowledge it with
 * {@link Queen#ack(Message)} or inside a {@link Transaction}.
 */
public final class Message {
  private final String queue;
  private final String partition;
  private final long partitionId;
  private final long offset;
  private final UUID id;
  private final String transactionId;
  private final String traceId;
  private final JsonNode payload;
  private final Instant createdAt;
  private final String consumerGroup;
  private final UUID leaseId;
  private final int attempt;
  private final ObjectMapper mapper;
  private final String payloadType;
  private final int payloadVersion;
  private final PayloadTypes types;

  /**
   * An untyped message. Made by Queen when it delivers a message; applications do not normally call it.
   *
   * @param mapper the {@link ObjectMapper} used by {@link #payload(Class)}
   */
  public Message(String queue, String partition, long partitionId, long offset, UUID id, String transactionId,
      String traceId, JsonNode payload, Instant createdAt, String consumerGroup, UUID leaseId, int attempt,
      ObjectMapper mapper) {
    this(queue, partition, partitionId, offset, id, transactionId, traceId, payload, createdAt, consumerGroup, leaseId,
        attempt, mapper, null, 0, PayloadTypes.NONE);
  }

  /**
   * Made by Queen when it delivers a message; applications do not normally call it.
   *
   * @param mapper the {@link ObjectMapper} used by {@link #payload(Class)}
   * @param payloadType the type name stored with the message, or {@code null} for an untyped one
   * @param payloadVersion its schema version (0 when untyped)
   * @param types the node's payload types and upcasters, used by {@link #payload(Class)}
   */
  public Message(String queue, String partition, long partitionId, long offset, UUID id, String transactionId,
      String traceId, JsonNode payload, Instant createdAt, String consumerGroup, UUID leaseId, int attempt,
      ObjectMapper mapper, String payloadType, int payloadVersion, PayloadTypes types) {
    this.payloadType = payloadType;
    this.payloadVersion = payloadType == null ? 0 : payloadVersion;
    this.types = Objects.requireNonNull(types, "types must not be null");
    this.queue = Objects.requireNonNull(queue, "queue must not be null");
    this.partition = Objects.requireNonNull(partition, "partition must not be null");
    this.partitionId = partitionId;
    this.offset = offset;
    this.id = Objects.requireNonNull(id, "id must not be null");
    this.transactionId = transactionId;
    this.traceId = traceId;
    this.payload = Objects.requireNonNull(payload, "payload must not be null");
    this.createdAt = Objects.requireNonNull(createdAt, "createdAt must not be null");
    this.consumerGroup = Objects.requireNonNull(consumerGroup, "consumerGroup must not be null");
    this.leaseId = leaseId;
    this.attempt = attempt;
    this.mapper = Objects.requireNonNull(mapper, "mapper must not be null");
  }

  public String queue() {
    return queue;
  }

  public String partition() {
    return partition;
  }

  /** The partition's numeric id (stable for the life of the partition). */
  public long partitionId() {
    return partitionId;
  }

  /** The message's offset: per partition, gapless, in commit order, from 0. */
  public long offset() {
    return offset;
  }

  /**
   * The message's id, made by the node that pushed it: a version 7 UUID (time-ordered; see
   * {@link PushResult#messageId()}). Messages stored before schema version 13 have random version 4 ids.
   */
  public UUID id() {
    return id;
  }

  /**
   * The de-duplication key given at push, or, for a message pushed without one, the transaction id Queen generated:
   * the text of {@link #id()} (also for messages stored before Queen generated ids, schema version 13). Never
   * {@code null}.
   */
  public String transactionId() {
    return transactionId;
  }

  public String traceId() {
    return traceId;
  }

  /**
   * The payload as a JSON tree, exactly as stored (not a copy: do not modify it). Available for every message,
   * typed or not, whatever its version.
   */
  public JsonNode payload() {
    return payload;
  }

  /**
   * The type name stored with the message ({@link QueenType} or the builder's {@code payloadType}), or
   * {@code null} for an untyped message.
   */
  public String payloadType() {
    return payloadType;
  }

  /** The schema version stored with the message, or 0 for an untyped message. */
  public int payloadVersion() {
    return payloadVersion;
  }

  /**
   * The payload converted to {@code type} with the broker's {@link ObjectMapper}.
   *
   * <p>When {@code type} is a typed payload class ({@link QueenType} or registered on the builder), the
   * message's stored type and version are checked first: the same type in the class's version is read as
   * it is; an older version is converted by the registered upcasters (v1→v2→v3...) on a copy; another type,
   * a newer version or a gap in the upcasters throws {@link PayloadTypeException} (from a handler: the
   * message fails and follows the queue's retry and dead-letter rules). An untyped message (pushed as JSON,
   * or before its class was typed) and an untyped class are read without a check.
   *
   * @throws PayloadTypeException when a typed message cannot be read as the typed class
   * @throws PayloadSerializationException naming the message, the type and the JSON path that failed
   *     (e.g. {@code amountCents}), never the value; without a cause, since Jackson's message quotes it
   */
  public <T> T payload(Class<T> type) {
    Objects.requireNonNull(type, "type must not be null");
    JsonNode json = payload;
    if (payloadType != null) {
      PayloadTypes.Type target = types.typeOf(type);
      if (target != null) {
        json = types.readable(payload, payloadType, payloadVersion, target, "message " + id + " (queue '" + queue
            + "', partition '" + partition + "', offset " + offset + ")");
      }
    }
    try {
      return mapper.treeToValue(json, type);
    } catch (Exception e) {
      String path = e instanceof com.fasterxml.jackson.databind.JsonMappingException jm && !jm.getPath().isEmpty()
          ? " at '" + jsonPath(jm) + "'" : "";
      throw new PayloadSerializationException("payload of message " + id + " (queue '" + queue + "', offset " + offset
          + ") cannot be read as " + type.getName() + path + ": " + e.getClass().getSimpleName(), null);
    }
  }

  private static String jsonPath(com.fasterxml.jackson.databind.JsonMappingException e) {
    StringBuilder b = new StringBuilder();
    for (com.fasterxml.jackson.databind.JsonMappingException.Reference r : e.getPath()) {
      if (r.getFieldName() != null) {
        b.append(b.length() == 0 ? "" : ".").append(r.getFieldName());
      } else if (r.getIndex() >= 0) {
        b.append('[').append(r.getIndex()).append(']');
      }
    }
    return b.toString();
  }

  /** When the message was stored (database clock). */
  public Instant createdAt() {
    return createdAt;
  }

  /** The consumer group it was delivered to ({@link Queen#DEFAULT_GROUP} for the queue's own group). */
  public String consumerGroup() {
    return consumerGroup;
  }

  /** The lease under which it was delivered, or {@code null} when it was delivered with auto-ack. */
  public UUID leaseId() {
    return leaseId;
  }

  /**
   * The delivery attempt, from 1: failed deliveries counted against this message so far, plus one.
   * Exact for the head message of a partition, which is the one that carries the failure count.
   */
  public int attempt() {
    return attempt;
  }

  /**
   * The KV key of a piece of state that belongs to this message's partition and group:
   * {@code @p/<queue>/<partition>/<group>/<name>}. Read-modify-write of such a key is safe under the
   * partition's lease (one consumer of the group at a time); see {@code docs/transactions-and-kv.md},
   * "Read-modify-write".
   */
  public String stateKey(String name) {
    Objects.requireNonNull(name, "name must not be null");
    return "@p/" + queue + "/" + partition + "/" + consumerGroup + "/" + name;
  }

  @Override
  public String toString() {
    return "Message[queue=" + queue + " partition=" + partition + " offset=" + offset + " id=" + id + " group="
        + (Queen.DEFAULT_GROUP.equals(consumerGroup) ? "(default)" : consumerGroup) + " attempt=" + attempt
        + (payloadType == null ? "" : " type=" + payloadType + " v" + payloadVersion) + "]";
  }
}
