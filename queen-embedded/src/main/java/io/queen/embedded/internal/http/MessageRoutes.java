package io.queen.embedded.internal.http;

import static io.queen.embedded.internal.http.Params.bad;
import static io.queen.embedded.internal.http.Params.clip;
import static io.queen.embedded.internal.http.Params.fields;
import static io.queen.embedded.internal.http.Params.instant;
import static io.queen.embedded.internal.http.Params.longField;
import static io.queen.embedded.internal.http.Params.text;
import static io.queen.embedded.internal.http.Params.uuid;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.ConsumerBuilder;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/** The message routes: {@code /api/v1/push}, {@code /pop} and {@code /ack}, through the public {@link Queen} API. */
final class MessageRoutes {
  static final int MAX_WAIT_MS = 60_000;

  private final Queen queen;

  MessageRoutes(Queen queen) {
    this.queen = queen;
  }

  Reply push(Request r) {
    ObjectNode body = r.object("items");
    JsonNode items = body.get("items");
    if (items == null || !items.isArray() || items.isEmpty()) {
      throw bad("items", "items must be a non-empty array of {queue, partition, payload, transactionId, traceId}");
    }
    List<PushItem> list = new ArrayList<>();
    for (int i = 0; i < items.size(); i++) {
      list.add(pushItem(items.get(i), "items[" + i + "]"));
    }
    return Reply.json(201, Views.pushes(queen.push(list)));
  }

  static PushItem pushItem(JsonNode n, String at) {
    ObjectNode o = fields(n, at, "queue", "partition", "payload", "transactionId", "traceId");
    String queue = text(o, "queue", at, true);
    String partition = text(o, "partition", at, false);
    if (!o.has("payload")) {
      throw bad(at + ".payload", at + ".payload is required (JSON null to push null)");
    }
    try {
      return PushItem.to(queue, partition == null ? Queen.DEFAULT_PARTITION : partition, o.get("payload"))
          .transactionId(text(o, "transactionId", at, false)).traceId(text(o, "traceId", at, false));
    } catch (IllegalArgumentException e) {
      throw bad(at, at + ": " + e.getMessage());
    }
  }

  Reply pop(Request r, List<String> rest) {
    if (rest.size() < 2 || !rest.get(0).equals("queue") || !(rest.size() == 2 || rest.size() == 4
        && rest.get(2).equals("partition"))) {
      throw new HttpError(404, "not_found", "pop routes: /api/v1/pop/queue/<queue> and"
          + " /api/v1/pop/queue/<queue>/partition/<partition>");
    }
    r.allowQuery("batch", "partitions", "consumerGroup", "subscriptionMode", "subscriptionFrom", "autoAck", "wait",
        "timeout");
    String group = r.query.get("consumerGroup");
    ConsumerBuilder c = group == null || group.isEmpty() ? queen.queue(rest.get(1)).consumer()
        : queen.queue(rest.get(1)).group(group);
    if (rest.size() == 4) {
      c.partition(rest.get(3));
    }
    c.batch(r.intParam("batch", 1));
    if (r.query.containsKey("partitions")) {
      c.partitions(r.intParam("partitions", 1));
    }
    String mode = r.query.get("subscriptionMode");
    if (mode != null) {
      switch (mode) {
        case "all" -> c.subscription(SubscriptionMode.ALL);
        case "new" -> c.subscription(SubscriptionMode.NEW);
        default -> throw bad("subscriptionMode", "subscriptionMode must be all or new (subscriptionFrom takes an"
            + " ISO-8601 instant), was '" + clip(mode) + "'");
      }
    }
    if (r.query.containsKey("subscriptionFrom")) {
      c.subscriptionFrom(instant(r.query.get("subscriptionFrom"), "subscriptionFrom"));
    }
    c.autoAck(r.boolParam("autoAck", false));
    if (r.boolParam("wait", false)) {
      int timeout = r.intParam("timeout", 30_000);
      if (timeout < 0 || timeout > MAX_WAIT_MS) {
        throw bad("timeout", "timeout must be 0.." + MAX_WAIT_MS + " ms, was " + timeout);
      }
      c.waitFor(Duration.ofMillis(timeout));
    } else if (r.query.containsKey("timeout")) {
      throw bad("timeout", "timeout applies with wait=true only");
    }
    ArrayNode out = Views.arr();
    for (Message msg : c.pop()) {
      out.add(Views.message(msg));
    }
    ObjectNode n = Views.obj();
    n.set("messages", out);
    return Reply.ok(n);
  }

  private static final String[] ACK_FIELDS = {"queue", "partition", "partitionId", "offset", "id", "transactionId",
      "leaseId", "consumerGroup", "status", "error", "attempt", "createdAt", "traceId", "data", "payloadType",
      "payloadVersion"};

  Reply ack(Request r, List<String> rest) {
    if (rest.isEmpty()) {
      AckReq a = ackReq(r.object(ACK_FIELDS), "(body)");
      return Reply.ok(Views.ack(queen.ack(a.message, a.status, a.error)));
    }
    if (!rest.equals(List.of("batch"))) {
      throw new HttpError(404, "not_found", "ack routes: /api/v1/ack and /api/v1/ack/batch");
    }
    ObjectNode body = r.object("acknowledgments");
    JsonNode list = body.get("acknowledgments");
    if (list == null || !list.isArray() || list.isEmpty()) {
      throw bad("acknowledgments", "acknowledgments must be a non-empty array of acks");
    }
    List<AckReq> reqs = new ArrayList<>();
    for (int i = 0; i < list.size(); i++) {
      reqs.add(ackReq(list.get(i), "acknowledgments[" + i + "]"));
    }
    // the Java API takes one status per call: acks of one status and error go together, answers in request order
    Map<String, List<Integer>> byKind = new LinkedHashMap<>();
    for (int i = 0; i < reqs.size(); i++) {
      byKind.computeIfAbsent(reqs.get(i).status + "\u0000" + reqs.get(i).error, k -> new ArrayList<>()).add(i);
    }
    AckResult[] out = new AckResult[reqs.size()];
    for (List<Integer> idx : byKind.values()) {
      AckReq first = reqs.get(idx.get(0));
      List<Message> msgs = new ArrayList<>();
      idx.forEach(i -> msgs.add(reqs.get(i).message));
      List<AckResult> res = queen.ack(msgs, first.status, first.error);
      for (int j = 0; j < idx.size(); j++) {
        out[idx.get(j)] = res.get(j);
      }
    }
    ArrayNode results = Views.arr();
    for (AckResult a : out) {
      results.add(Views.ack(a));
    }
    ObjectNode n = Views.obj();
    n.set("results", results);
    return Reply.ok(n);
  }

  record AckReq(Message message, AckStatus status, String error) {}

  /** An ack as the pop handed the message out (its {@code data} and other facts may come along and are not used). */
  static AckReq ackReq(JsonNode n, String at) {
    ObjectNode o = fields(n, at, ACK_FIELDS);
    String queue = text(o, "queue", at, true);
    long partitionId = longField(o, "partitionId", at);
    long offset = longField(o, "offset", at);
    String lease = text(o, "leaseId", at, false);
    if (lease == null) {
      throw bad(at + ".leaseId", at + ".leaseId is required: ack the message with the leaseId its pop returned (a"
          + " message popped with autoAck=true needs no ack)");
    }
    String group = text(o, "consumerGroup", at, false);
    String status = text(o, "status", at, false);
    AckStatus st;
    switch (status == null ? "completed" : status) {
      case "completed" -> st = AckStatus.COMPLETED;
      case "failed" -> st = AckStatus.FAILED;
      case "dead_letter" -> st = AckStatus.DEAD_LETTER;
      default -> throw bad(at + ".status", at + ".status must be completed, failed or dead_letter, was '"
          + clip(status) + "'");
    }
    String partition = text(o, "partition", at, false);
    String id = text(o, "id", at, false);
    Message m = new Message(queue, partition == null ? "?" : partition, partitionId, offset,
        id == null ? new UUID(0, 0) : uuid(id, at + ".id"), text(o, "transactionId", at, false), null,
        NullNode.instance, Instant.EPOCH, group == null ? Queen.DEFAULT_GROUP : group, uuid(lease, at + ".leaseId"),
        0, Views.OUT);
    return new AckReq(m, st, text(o, "error", at, false));
  }
}
