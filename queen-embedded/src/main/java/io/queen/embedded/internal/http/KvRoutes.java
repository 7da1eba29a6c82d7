package io.queen.embedded.internal.http;

import static io.queen.embedded.internal.http.Params.bad;
import static io.queen.embedded.internal.http.Params.bool;
import static io.queen.embedded.internal.http.Params.clip;
import static io.queen.embedded.internal.http.Params.fields;
import static io.queen.embedded.internal.http.Params.longField;
import static io.queen.embedded.internal.http.Params.need;
import static io.queen.embedded.internal.http.Params.text;
import static io.queen.embedded.internal.http.Params.write;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.Queen;
import io.queen.Transaction;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The KV routes ({@code /api/v1/kv}) and the transaction bundle ({@code /api/v1/transaction}), whose operations are
 * KV writes and reads, pushes and acks.
 */
final class KvRoutes {
  private static final String[] KV_FIELDS = {"op", "namespace", "key", "keys", "prefix", "after", "limit", "value",
      "ttlSeconds", "forever", "expect", "max", "delta", "required"};
  private static final Set<String> KV_READS = Set.of("get", "getMany", "getPrefix");

  private final Queen queen;
  private final boolean readOnly;

  KvRoutes(Queen queen, boolean readOnly) {
    this.queen = queen;
    this.readOnly = readOnly;
  }

  Reply transaction(Request r) {
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
          tx.push(MessageRoutes.pushItem(o, at));
        }
        case "ack" -> {
          ObjectNode o = ((ObjectNode) op).deepCopy();
          o.remove("op");
          MessageRoutes.AckReq a = MessageRoutes.ackReq(o, at);
          tx.ack(a.message(), a.status(), a.error());
        }
        default -> kvInto(tx, (ObjectNode) op, at);
      }
    }
    return Reply.ok(Views.commit(tx.commit()));
  }

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

  Reply kv(Request r, String m, List<String> rest) {
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
        write(readOnly);
        r.allowQuery("ttlSeconds", "forever");
        ObjectNode o = Views.obj();
        if (r.query.containsKey("ttlSeconds")) {
          o.put("ttlSeconds", r.intParam("ttlSeconds", 0));
        }
        if (r.query.containsKey("forever")) {
          o.put("forever", r.boolParam("forever", false));
        }
        return Reply.ok(kvWrite(kv.put(ns, key, r.json(), options(o, "(query)"))));
      }
      case "DELETE" -> {
        write(readOnly);
        r.allowQuery("expect");
        return Reply.ok(kvWrite(r.query.containsKey("expect") ? kv.delete(ns, key, r.longParam("expect"))
            : kv.delete(ns, key)));
      }
      default -> throw new HttpError(405, "method_not_allowed", "this route answers GET, PUT, DELETE, not " + m);
    }
  }

  private Reply kvPost(ObjectNode o) {
    String at = "(body)";
    String op = text(o, "op", at, true);
    if (!KV_READS.contains(op)) {
      write(readOnly);
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
}
