package io.queen.embedded.internal.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.ConnectorStatus;
import io.queen.ConsumerBuilder;
import io.queen.DeadLetter;
import io.queen.DeadLetters;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Status;
import io.queen.SubscriptionMode;
import io.queen.Transaction;
import io.queen.embedded.internal.http.HttpSurface.HttpError;
import io.queen.embedded.internal.http.HttpSurface.Reply;
import io.queen.embedded.internal.http.HttpSurface.Request;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.function.BooleanSupplier;

/**
 * The routes: the HTTP surface ({@code /api/v1/push}, {@code /pop}, {@code /ack}, {@code /transaction},
 * {@code /kv}, {@code /connectors}, {@code /status}, {@code /health}, {@code /metrics/prometheus}), the few reads
 * the dashboard adds ({@code /api/v1/queues}, dead letters), and the dashboard's files. Every route goes through the
 * public {@link Queen} API, so it validates names and values exactly as a Java caller's call does.
 */
final class Routes {
  private static final String DASHBOARD = "/io/queen/embedded/internal/http/dashboard/";
  private static final Map<String, String> FILES = Map.of("index.html", "text/html; charset=utf-8",
      "login.html", "text/html; charset=utf-8", "app.js", "text/javascript; charset=utf-8",
      "login.js", "text/javascript; charset=utf-8", "app.css", "text/css; charset=utf-8");
  static final int MAX_WAIT_MS = 60_000;

  private final Queen queen;
  private final boolean readOnly;
  private final BooleanSupplier databaseReady;
  private final Object meterRegistry;

  Routes(Queen queen, boolean readOnly, BooleanSupplier databaseReady, Object meterRegistry) {
    this.queen = queen;
    this.readOnly = readOnly;
    this.databaseReady = databaseReady;
    this.meterRegistry = meterRegistry;
  }

  static boolean isDashboard(String path) {
    return path.equals("/") || path.equals("/dashboard") || path.startsWith("/dashboard/");
  }

  Reply route(Request r) {
    List<String> p = HttpSurface.segments(r.path);
    String m = r.method.equals("HEAD") ? "GET" : r.method;
    if (isDashboard(r.path)) {
      need(m, "GET");
      return file(p.size() <= 1 ? "index.html" : String.join("/", p.subList(1, p.size())));
    }
    if (p.size() >= 1 && p.get(0).equals("health")) {
      need(m, "GET");
      return health(p.size() == 1 ? "live" : p.get(1));
    }
    if (p.equals(List.of("metrics", "prometheus"))) {
      need(m, "GET");
      return prometheus();
    }
    if (p.size() < 3 || !p.get(0).equals("api") || !p.get(1).equals("v1")) {
      throw notFound(r);
    }
    String what = p.get(2);
    List<String> rest = p.subList(3, p.size());
    switch (what) {
      case "status":
        need(m, "GET");
        r.allowQuery();
        return status();
      case "push":
        need(m, "POST");
        write();
        return push(r);
      case "pop":
        need(m, "GET");
        write();
        return pop(r, rest);
      case "ack":
        need(m, "POST");
        write();
        return ack(r, rest);
      case "transaction":
        need(m, "POST");
        write();
        return transaction(r);
      case "kv":
        return kv(r, m, rest);
      case "connectors":
        return connectors(r, m, rest);
      case "queues":
        return queues(r, m, rest);
      case "nodes":
        need(m, "GET");
        r.allowQuery();
        return Reply.ok(Views.obj().set("nodes", Views.nodes(queen.status().nodes())));
      default:
        throw notFound(r);
    }
  }

  private static HttpError notFound(Request r) {
    return new HttpError(404, "not_found", "no route " + r.method + " " + r.path);
  }

  private static void need(String method, String... allowed) {
    for (String a : allowed) {
      if (a.equals(method)) {
        return;
      }
    }
    throw new HttpError(405, "method_not_allowed", "this route answers " + String.join(", ", allowed) + ", not "
        + method);
  }

  /** Refuses a route that changes something on a read-only node. */
  private void write() {
    if (readOnly) {
      throw new HttpError(403, "read_only", "this node's HTTP surface is read-only (HttpOptions.readOnly)");
    }
  }

  // ------------------------------------------------------------------------------------- health, status, metrics

  private Reply health(String which) {
    if (which.equals("live")) {
      return Reply.ok(Views.obj().put("status", "ok").put("node", queen.nodeId()));
    }
    if (!which.equals("ready")) {
      throw new HttpError(404, "not_found", "health checks: /health/live, /health/ready");
    }
    boolean db = databaseReady.getAsBoolean();
    int inError = 0;
    boolean connectors = true;
    try {
      for (ConnectorStatus c : queen.connectors().status()) {
        if ("error".equals(c.phase())) {
          inError++;
        }
      }
    } catch (UnsupportedOperationException e) {
      connectors = false; // no queen-pgconn on the classpath: nothing to be in error
    } catch (RuntimeException e) {
      db = false;
    }
    boolean ready = db && inError == 0;
    ObjectNode checks = Views.obj().put("database", db).put("migrations", true).put("connectorsInError", inError)
        .put("connectorsAvailable", connectors);
    ObjectNode n = Views.obj().put("status", ready ? "ready" : "not_ready").put("node", queen.nodeId());
    n.set("checks", checks);
    return Reply.json(ready ? 200 : 503, n);
  }

  private Reply status() {
    Status st = queen.status();
    return Reply.ok(Views.status(st, queen.nodeId(), st.connectors()).put("readOnly", readOnly));
  }

  private Reply prometheus() {
    if (meterRegistry != null && meterRegistry.getClass().getSimpleName().equals("PrometheusMeterRegistry")) {
      try {
        Object text = meterRegistry.getClass().getMethod("scrape").invoke(meterRegistry);
        return new Reply(200, "text/plain; version=0.0.4; charset=utf-8",
            String.valueOf(text).getBytes(StandardCharsets.UTF_8));
      } catch (ReflectiveOperationException e) {
        throw new HttpError(500, "metrics_failed", "the Prometheus registry could not be scraped");
      }
    }
    throw new HttpError(404, "metrics_unavailable", "this node has no Prometheus registry: give the builder a"
        + " PrometheusMeterRegistry (micrometer-registry-prometheus) as meterRegistry(...)");
  }

  // ------------------------------------------------------------------------------------- push, pop, ack

  private Reply push(Request r) {
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

  private static PushItem pushItem(JsonNode n, String at) {
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

  private Reply pop(Request r, List<String> rest) {
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
    c.batch(intParam(r, "batch", 1));
    if (r.query.containsKey("partitions")) {
      c.partitions(intParam(r, "partitions", 1));
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
    c.autoAck(boolParam(r, "autoAck", false));
    if (boolParam(r, "wait", false)) {
      int timeout = intParam(r, "timeout", 30_000);
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

  private Reply ack(Request r, List<String> rest) {
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

  private record AckReq(Message message, AckStatus status, String error) {}

  /** An ack as the pop handed the message out (its {@code data} and other facts may come along and are not used). */
  private AckReq ackReq(JsonNode n, String at) {
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

  // ------------------------------------------------------------------------------------- transaction

  private Reply transaction(Request r) {
    ObjectNode body = r.object("operations");
    JsonNode ops = body.get("operations");
    if (ops == null || !ops.isArray() || ops.isEmpty()) {
      throw bad("operations", "operations must be a non-empty array of {\"op\": push|ack|put|putIfAbsent|once|incr|"
          + "delete|get|getMany, ...}");
    }
    Transaction tx = queen.transaction();
    for (int i = 0; i < ops.size(); i++) {
      String at = "operations[" + i + "]";
      JsonNode op = ops.get(i);
      if (!op.isObject() || !op.path("op").isTextual()) {
        throw bad(at + ".op", at + " must be an object with a string field op");
      }
      switch (op.get("op").asText()) {
        case "push" -> {
          ObjectNode o = ((ObjectNode) op).deepCopy();
          o.remove("op");
          tx.push(pushItem(o, at));
        }
        case "ack" -> {
          ObjectNode o = ((ObjectNode) op).deepCopy();
          o.remove("op");
          AckReq a = ackReq(o, at);
          tx.ack(a.message, a.status, a.error);
        }
        default -> kvInto(tx, (ObjectNode) op, at);
      }
    }
    return Reply.ok(Views.commit(tx.commit()));
  }

  private static final String[] KV_FIELDS = {"op", "namespace", "key", "keys", "prefix", "after", "limit", "value",
      "ttlSeconds", "forever", "expect", "max", "delta", "required"};
  private static final Set<String> KV_READS = Set.of("get", "getMany", "getPrefix");

  private static void kvInto(Transaction tx, ObjectNode op, String at) {
    ObjectNode o = fields(op, at, KV_FIELDS);
    String name = text(o, "op", at, true);
    String ns = text(o, "namespace", at, true);
    boolean required = bool(o, "required", at);
    switch (name) {
      case "get" -> tx.get(ns, text(o, "key", at, true));
      case "getMany" -> tx.getMany(ns, keys(o, at));
      case "put" -> tx.put(ns, text(o, "key", at, true), value(o, at), req(options(o, at), required));
      case "putIfAbsent" -> tx.putIfAbsent(ns, text(o, "key", at, true), value(o, at), req(options(o, at), required));
      case "once" -> tx.once(ns, text(o, "key", at, true), req(options(o, at), required));
      case "incr" -> tx.incr(ns, text(o, "key", at, true), delta(o, at), req(options(o, at), required));
      case "delete" -> {
        if (o.has("expect")) {
          tx.delete(ns, text(o, "key", at, true), longField(o, "expect", at), required);
        } else {
          tx.delete(ns, text(o, "key", at, true));
        }
      }
      default -> throw bad(at + ".op", at + ".op must be push, ack, get, getMany, put, putIfAbsent, once, incr or"
          + " delete (getPrefix is not allowed in a transaction: its cost is unbounded), was '" + clip(name) + "'");
    }
  }

  private static KvOptions req(KvOptions o, boolean required) {
    return required ? o.required() : o;
  }

  // ------------------------------------------------------------------------------------- KV

  private Reply kv(Request r, String m, List<String> rest) {
    if (rest.isEmpty()) {
      need(m, "POST");
      return kvPost(r.object(KV_FIELDS));
    }
    if (rest.size() < 2) {
      throw new HttpError(404, "not_found", "KV routes: POST /api/v1/kv, and GET, PUT, DELETE /api/v1/kv/<namespace>/"
          + "<key>");
    }
    String ns = rest.get(0);
    String key = String.join("/", rest.subList(1, rest.size()));
    Kv kv = queen.kv();
    switch (m) {
      case "GET" -> {
        r.allowQuery();
        return Reply.ok(Views.entry(kv.get(ns, key)));
      }
      case "PUT" -> {
        write();
        r.allowQuery("ttlSeconds", "forever");
        ObjectNode o = Views.obj();
        if (r.query.containsKey("ttlSeconds")) {
          o.put("ttlSeconds", intParam(r, "ttlSeconds", 0));
        }
        if (r.query.containsKey("forever")) {
          o.put("forever", boolParam(r, "forever", false));
        }
        return Reply.ok(kvWrite(kv.put(ns, key, r.json(), options(o, "(query)"))));
      }
      case "DELETE" -> {
        write();
        r.allowQuery("expect");
        return Reply.ok(kvWrite(r.query.containsKey("expect") ? kv.delete(ns, key, longParam(r, "expect"))
            : kv.delete(ns, key)));
      }
      default -> throw new HttpError(405, "method_not_allowed", "this route answers GET, PUT, DELETE, not " + m);
    }
  }

  private Reply kvPost(ObjectNode o) {
    String at = "(body)";
    String op = text(o, "op", at, true);
    if (!KV_READS.contains(op)) {
      write();
    }
    String ns = text(o, "namespace", at, true);
    if (bool(o, "required", at)) {
      throw bad("required", "required applies to a write inside a transaction (POST /api/v1/transaction)");
    }
    Kv kv = queen.kv();
    return switch (op) {
      case "get" -> Reply.ok(Views.entry(kv.get(ns, text(o, "key", at, true))));
      case "getMany" -> {
        ArrayNode rows = Views.arr();
        kv.getMany(ns, keys(o, at)).forEach(e -> rows.add(Views.entry(e)));
        ObjectNode n = Views.obj();
        n.set("rows", rows);
        yield Reply.ok(n);
      }
      case "getPrefix" -> {
        String prefix = text(o, "prefix", at, true);
        int limit = o.has("limit") ? (int) longField(o, "limit", at) : Kv.MAX_PAGE;
        yield Reply.ok(Views.page(kv.getPrefix(ns, prefix, text(o, "after", at, false), limit)));
      }
      case "put" -> Reply.ok(kvWrite(kv.put(ns, text(o, "key", at, true), value(o, at), options(o, at))));
      case "putIfAbsent" -> Reply.ok(kvWrite(kv.putIfAbsent(ns, text(o, "key", at, true), value(o, at),
          options(o, at))));
      case "once" -> Reply.ok(kvWrite(kv.once(ns, text(o, "key", at, true), options(o, at))));
      case "incr" -> Reply.ok(kvWrite(kv.incr(ns, text(o, "key", at, true), delta(o, at), options(o, at))));
      case "delete" -> Reply.ok(kvWrite(o.has("expect") ? kv.delete(ns, text(o, "key", at, true),
          longField(o, "expect", at)) : kv.delete(ns, text(o, "key", at, true))));
      default -> throw bad("op", "op must be get, getMany, getPrefix, put, putIfAbsent, once, incr or delete, was '"
          + clip(op) + "'");
    };
  }

  private static ObjectNode kvWrite(io.queen.KvWriteResult w) {
    ObjectNode n = Views.write(w);
    n.put("success", w.applied());
    return n;
  }

  private static KvOptions options(ObjectNode o, String at) {
    boolean forever = bool(o, "forever", at);
    boolean ttl = o.has("ttlSeconds") && !o.get("ttlSeconds").isNull();
    if (forever == ttl) {
      throw bad("ttlSeconds", "every write carries exactly one of ttlSeconds (an integer above zero) or forever: true");
    }
    KvOptions opts;
    if (forever) {
      opts = Kv.forever();
    } else {
      long s = longField(o, "ttlSeconds", at);
      if (s <= 0) {
        throw bad("ttlSeconds", "ttlSeconds must be an integer above zero, was " + s);
      }
      opts = Kv.ttl(Duration.ofSeconds(s));
    }
    if (o.has("expect") && !o.get("expect").isNull()) {
      opts = opts.expect(longField(o, "expect", at));
    }
    if (o.has("max") && !o.get("max").isNull()) {
      opts = opts.max(longField(o, "max", at));
    }
    return opts;
  }

  private static JsonNode value(ObjectNode o, String at) {
    if (!o.has("value")) {
      throw bad("value", "value is required (JSON null stores null)");
    }
    return o.get("value");
  }

  private static long delta(ObjectNode o, String at) {
    return o.has("delta") ? longField(o, "delta", at) : 1;
  }

  private static List<String> keys(ObjectNode o, String at) {
    JsonNode k = o.get("keys");
    if (k == null || !k.isArray()) {
      throw bad("keys", "keys must be an array of strings");
    }
    List<String> out = new ArrayList<>();
    for (JsonNode e : k) {
      if (!e.isTextual()) {
        throw bad("keys", "keys must be an array of strings");
      }
      out.add(e.asText());
    }
    return out;
  }

  // ------------------------------------------------------------------------------------- connectors

  private Reply connectors(Request r, String m, List<String> rest) {
    r.allowQuery();
    if (rest.isEmpty()) {
      need(m, "GET");
      ArrayNode list = Views.arr();
      Map<String, ConnectorStatus> st = new LinkedHashMap<>();
      queen.connectors().status().forEach(s -> st.put(s.name(), s));
      for (String name : queen.connectors().list()) {
        ObjectNode n = Views.obj().put("name", name);
        ConnectorStatus s = st.get(name);
        n.put("kind", s == null ? null : s.kind());
        n.set("status", s == null ? null : Views.connectorStatus(s));
        list.add(n);
      }
      ObjectNode n = Views.obj();
      n.set("connectors", list);
      return Reply.ok(n);
    }
    String name = rest.get(0);
    if (rest.size() == 2) {
      need(m, "POST");
      write();
      boolean known = switch (rest.get(1)) {
        case "pause" -> queen.connectors().setEnabled(name, false);
        case "resume" -> queen.connectors().setEnabled(name, true);
        case "resync" -> queen.connectors().resync(name);
        default -> throw new HttpError(404, "not_found", "connector actions: pause, resume, resync");
      };
      if (!known) {
        throw new HttpError(404, "connector_not_found", "no connector '" + clip(name) + "'");
      }
      return connectorView(name);
    }
    if (rest.size() != 1) {
      throw notFound(r);
    }
    switch (m) {
      case "GET" -> {
        return connectorView(name);
      }
      case "PUT" -> {
        write();
        queen.connectors().put(name, r.json());
        return connectorView(name);
      }
      case "DELETE" -> {
        write();
        if (!queen.connectors().delete(name)) {
          throw new HttpError(404, "connector_not_found", "no connector '" + clip(name) + "'");
        }
        return Reply.ok(Views.obj().put("name", name).put("deleted", true));
      }
      default -> throw new HttpError(405, "method_not_allowed", "this route answers GET, PUT, DELETE, not " + m);
    }
  }

  /** The stored document (never its password) with {@code name} and this node's {@code status}. */
  private Reply connectorView(String name) {
    JsonNode doc = queen.connectors().get(name).orElseThrow(() -> new HttpError(404, "connector_not_found",
        "no connector '" + clip(name) + "'"));
    ObjectNode n = Views.obj().put("name", name);
    doc.fields().forEachRemaining(e -> n.set(e.getKey(), e.getValue()));
    n.set("status", queen.connectors().status(name).map(Views::connectorStatus).orElse(null));
    return Reply.ok(n);
  }

  // ------------------------------------------------------------------------------------- queues, dead letters

  private Reply queues(Request r, String m, List<String> rest) {
    if (rest.isEmpty()) {
      need(m, "GET");
      r.allowQuery();
      ArrayNode qs = Views.arr();
      queen.status().queues().forEach(q -> qs.add(Views.queue(q)));
      ObjectNode n = Views.obj();
      n.set("queues", qs);
      return Reply.ok(n);
    }
    String queue = rest.get(0);
    if (rest.size() == 1) {
      need(m, "GET");
      r.allowQuery();
      Status.QueueStatus q = queen.status().queue(queue);
      if (q == null) {
        throw new HttpError(404, "queue_not_found", "no queue '" + clip(queue) + "'");
      }
      return Reply.ok(Views.queue(q));
    }
    if (rest.size() == 2 && rest.get(1).equals("partitions")) {
      need(m, "GET");
      r.allowQuery("after", "limit");
      ArrayNode ps = Views.arr();
      List<Status.PartitionStatus> page = queen.queue(queue).partitions(r.query.get("after"), intParam(r, "limit", 100));
      page.forEach(x -> ps.add(Views.partition(x)));
      ObjectNode n = Views.obj();
      n.set("partitions", ps);
      n.put("next", page.size() == intParam(r, "limit", 100) ? page.get(page.size() - 1).name() : null);
      return Reply.ok(n);
    }
    if (!rest.get(1).equals("dead-letters")) {
      throw notFound(r);
    }
    DeadLetters.Query dl = deadLetterGroup(queue, r.query.get("consumerGroup"));
    if (rest.size() == 2) {
      switch (m) {
        case "GET" -> {
          r.allowQuery("consumerGroup", "limit", "after");
          int limit = intParam(r, "limit", 50);
          Long after = r.query.containsKey("after") ? longParam(r, "after") : null;
          ArrayNode items = Views.arr();
          List<DeadLetter> list = dl.list(limit, after);
          list.forEach(d -> items.add(Views.deadLetter(d)));
          ObjectNode n = Views.obj();
          n.set("deadLetters", items);
          n.put("next", list.size() == limit ? list.get(list.size() - 1).id() : null);
          return Reply.ok(n);
        }
        case "DELETE" -> {
          write();
          r.allowQuery("consumerGroup");
          return Reply.ok(Views.obj().put("purged", dl.purge()));
        }
        default -> throw new HttpError(405, "method_not_allowed", "this route answers GET, DELETE, not " + m);
      }
    }
    if (rest.size() == 3 && rest.get(2).equals("redrive")) {
      need(m, "POST");
      write();
      r.allowQuery("consumerGroup", "id");
      if (!r.query.containsKey("id")) {
        return Reply.ok(Views.obj().put("redriven", dl.redriveAll()));
      }
      long id = longParam(r, "id");
      String group = r.query.get("consumerGroup");
      DeadLetter d = new DeadLetter(id, queue, "", 0, 0, group == null || group.isEmpty() ? Queen.DEFAULT_GROUP
          : group, null, null, null, 0, null, 0, null);
      boolean done = dl.redrive(d);
      if (!done) {
        throw new HttpError(404, "dead_letter_not_found", "no dead letter " + id + " in that queue and group");
      }
      return Reply.ok(Views.obj().put("redriven", 1));
    }
    if (rest.size() == 3) {
      need(m, "DELETE");
      write();
      r.allowQuery("consumerGroup");
      long id;
      try {
        id = Long.parseLong(rest.get(2));
      } catch (NumberFormatException e) {
        throw bad("id", "a dead letter's id is a number");
      }
      String group = r.query.get("consumerGroup");
      DeadLetter d = new DeadLetter(id, queue, "", 0, 0, group == null || group.isEmpty() ? Queen.DEFAULT_GROUP
          : group, null, null, null, 0, null, 0, null);
      if (!dl.delete(d)) {
        throw new HttpError(404, "dead_letter_not_found", "no dead letter " + id + " in that queue and group");
      }
      return Reply.ok(Views.obj().put("deleted", 1));
    }
    throw notFound(r);
  }

  private DeadLetters.Query deadLetterGroup(String queue, String group) {
    DeadLetters d = queen.deadLetters(queue);
    return group == null || group.isEmpty() ? d.defaultGroup() : d.group(group);
  }

  // ------------------------------------------------------------------------------------- the dashboard's files

  private static Reply file(String name) {
    String type = FILES.get(name);
    if (type == null) {
      throw new HttpError(404, "not_found", "no dashboard file '" + clip(name) + "'");
    }
    try (InputStream in = Routes.class.getResourceAsStream(DASHBOARD + name)) {
      if (in == null) {
        throw new HttpError(404, "not_found", "no dashboard file '" + clip(name) + "'");
      }
      return new Reply(200, type, in.readAllBytes());
    } catch (IOException e) {
      throw new HttpError(500, "internal", "the dashboard file could not be read");
    }
  }

  static Reply loginPage() {
    Reply page = file("login.html");
    return new Reply(401, page.contentType(), page.body());
  }

  // ------------------------------------------------------------------------------------- JSON and parameters

  /** {@code n} as an object whose keys are all in {@code allowed}; an unknown key is a 400 naming it. */
  static ObjectNode fields(JsonNode n, String at, String... allowed) {
    if (n == null || !n.isObject()) {
      throw bad(at, at + " must be a JSON object");
    }
    List<String> ok = List.of(allowed);
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!ok.contains(k)) {
        throw new HttpError(400, "unknown_field", "unknown field '" + clip(k) + "' in " + at + "; allowed: " + ok,
            at.equals("(body)") ? k : at + "." + k);
      }
    }
    return (ObjectNode) n;
  }

  private static String text(ObjectNode o, String f, String at, boolean required) {
    JsonNode v = o.get(f);
    if (v == null || v.isNull()) {
      if (required) {
        throw bad(path(at, f), path(at, f) + " is required");
      }
      return null;
    }
    if (!v.isTextual()) {
      throw bad(path(at, f), path(at, f) + " must be a string");
    }
    return v.asText();
  }

  private static boolean bool(ObjectNode o, String f, String at) {
    JsonNode v = o.get(f);
    if (v == null || v.isNull()) {
      return false;
    }
    if (!v.isBoolean()) {
      throw bad(path(at, f), path(at, f) + " must be true or false");
    }
    return v.asBoolean();
  }

  private static long longField(ObjectNode o, String f, String at) {
    JsonNode v = o.get(f);
    if (v == null || !v.isIntegralNumber() || !v.canConvertToLong()) {
      throw bad(path(at, f), path(at, f) + " must be an integer");
    }
    return v.asLong();
  }

  private static String path(String at, String f) {
    return at.equals("(body)") ? f : at + "." + f;
  }

  private static int intParam(Request r, String name, int dflt) {
    String v = r.query.get(name);
    if (v == null) {
      return dflt;
    }
    try {
      return Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw bad(name, name + " must be an integer, was '" + clip(v) + "'");
    }
  }

  private static long longParam(Request r, String name) {
    String v = r.query.get(name);
    try {
      return Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw bad(name, name + " must be an integer, was '" + clip(v) + "'");
    }
  }

  private static boolean boolParam(Request r, String name, boolean dflt) {
    String v = r.query.get(name);
    if (v == null) {
      return dflt;
    }
    if (v.equals("true") || v.isEmpty()) {
      return true;
    }
    if (v.equals("false")) {
      return false;
    }
    throw bad(name, name + " must be true or false, was '" + clip(v) + "'");
  }

  private static Instant instant(String v, String name) {
    try {
      return Instant.parse(v);
    } catch (DateTimeParseException e) {
      throw bad(name, name + " must be an ISO-8601 instant such as 2026-10-03T06:14:39Z, was '" + clip(v) + "'");
    }
  }

  private static UUID uuid(String v, String name) {
    try {
      return UUID.fromString(v);
    } catch (IllegalArgumentException e) {
      throw bad(name, name + " must be a UUID");
    }
  }

  /** An identifier echoed in an error, cut short: errors name what was wrong, never repeat a whole input. */
  static String clip(String s) {
    return s == null ? "null" : s.length() > 64 ? s.substring(0, 61) + "..." : s;
  }

  private static HttpError bad(String field, String message) {
    return new HttpError(400, "invalid_request", message, field);
  }
}
