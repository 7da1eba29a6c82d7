package io.queen.embedded.internal.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;

/**
 * What every route checks of its input: the method, the segments of the path, the fields of a JSON body; each failure
 * is an {@link HttpError} naming the field (400) or the methods the route answers (405). Query parameters are read
 * through {@link Request}.
 */
final class Params {
  private Params() {}

  static void need(String method, String... allowed) {
    for (String a : allowed) {
      if (a.equals(method)) {
        return;
      }
    }
    throw new HttpError(405, "method_not_allowed", "this route answers " + String.join(", ", allowed) + ", not "
        + method);
  }

  /** Refuses a route that changes something on a read-only node. */
  static void write(boolean readOnly) {
    if (readOnly) {
      throw new HttpError(403, "read_only", "this node's HTTP surface is read-only (HttpOptions.readOnly)");
    }
  }

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

  static String text(ObjectNode o, String f, String at, boolean required) {
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

  static boolean bool(ObjectNode o, String f, String at) {
    JsonNode v = o.get(f);
    if (v == null || v.isNull()) {
      return false;
    }
    if (!v.isBoolean()) {
      throw bad(path(at, f), path(at, f) + " must be true or false");
    }
    return v.asBoolean();
  }

  static long longField(ObjectNode o, String f, String at) {
    JsonNode v = o.get(f);
    if (v == null || !v.isIntegralNumber() || !v.canConvertToLong()) {
      throw bad(path(at, f), path(at, f) + " must be an integer");
    }
    return v.asLong();
  }

  static String path(String at, String f) {
    return at.equals("(body)") ? f : at + "." + f;
  }

  static Instant instant(String v, String name) {
    try {
      return Instant.parse(v);
    } catch (DateTimeParseException e) {
      throw bad(name, name + " must be an ISO-8601 instant such as 2026-10-03T06:14:39Z, was '" + clip(v) + "'");
    }
  }

  static UUID uuid(String v, String name) {
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

  static HttpError bad(String field, String message) {
    return new HttpError(400, "invalid_request", message, field);
  }

  /** The decoded segments of a raw path. */
  static List<String> segments(String rawPath) {
    List<String> out = new ArrayList<>();
    for (String s : rawPath.split("/")) {
      if (!s.isEmpty()) {
        out.add(URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8));
      }
    }
    return out;
  }
}
