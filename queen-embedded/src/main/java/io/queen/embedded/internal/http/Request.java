package io.queen.embedded.internal.http;

import static io.queen.embedded.internal.http.Params.bad;
import static io.queen.embedded.internal.http.Params.clip;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Map;

/** One request: method, raw path, decoded query, and the body read on demand within the bound. */
final class Request {
  /** Reads request bodies: duplicate keys refused, decimals kept with their digits (a payload's 12.50 stays 12.50). */
  private static final ObjectMapper JSON = new ObjectMapper().enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
      .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
      .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false);

  final String method;
  final String path;
  final Map<String, String> query;
  private final HttpExchange ex;
  private final int maxBody;

  Request(String method, String path, Map<String, String> query, HttpExchange ex, int maxBody) {
    this.method = method;
    this.path = path;
    this.query = query;
    this.ex = ex;
    this.maxBody = maxBody;
  }

  /** Refuses query parameters other than {@code allowed}: a misspelt one would otherwise be ignored in silence. */
  void allowQuery(String... allowed) {
    List<String> ok = List.of(allowed);
    for (String k : query.keySet()) {
      if (!ok.contains(k)) {
        throw new HttpError(400, "invalid_request", "unknown query parameter '" + k + "'; allowed: " + ok);
      }
    }
  }

  byte[] bytes() {
    String length = ex.getRequestHeaders().getFirst("Content-Length");
    if (length != null) {
      long n;
      try {
        n = Long.parseLong(length.trim());
      } catch (NumberFormatException e) {
        throw new HttpError(400, "invalid_request", "Content-Length is not a number");
      }
      if (n > maxBody) {
        throw new HttpError(413, "body_too_large", "the request body is " + n + " bytes; this node takes at most "
            + maxBody + " (HttpOptions.maxBodyBytes)");
      }
    }
    try (InputStream in = ex.getRequestBody()) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      byte[] buf = new byte[8192];
      int r;
      while ((r = in.read(buf)) >= 0) {
        out.write(buf, 0, r);
        if (out.size() > maxBody) {
          throw new HttpError(413, "body_too_large", "the request body is over " + maxBody
              + " bytes (HttpOptions.maxBodyBytes)");
        }
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new HttpError(400, "invalid_request", "the request body could not be read");
    }
  }

  /** The body as JSON: a JSON content type, well-formed, no duplicate keys. */
  JsonNode json() {
    String type = ex.getRequestHeaders().getFirst("Content-Type");
    if (type == null || !type.toLowerCase(java.util.Locale.ROOT).startsWith("application/json")) {
      throw new HttpError(415, "unsupported_media_type", "send the body as Content-Type: application/json");
    }
    byte[] b = bytes();
    if (b.length == 0) {
      throw new HttpError(400, "invalid_json", "the request body is empty; a JSON document is expected");
    }
    try {
      return JSON.readTree(b);
    } catch (JsonProcessingException e) {
      // Jackson's message may quote the body: only the position goes out
      String where = e.getLocation() == null ? "" : " at line " + e.getLocation().getLineNr() + ", column "
          + e.getLocation().getColumnNr();
      throw new HttpError(400, "invalid_json", "the request body is not valid JSON" + where
          + (e.getMessage() != null && e.getMessage().startsWith("Duplicate field") ? " (a key is given twice)" : ""));
    } catch (IOException e) {
      throw new HttpError(400, "invalid_json", "the request body is not valid JSON");
    }
  }

  /** The body as a JSON object whose keys are all in {@code allowed}. */
  ObjectNode object(String... allowed) {
    JsonNode n = json();
    return Params.fields(n, "(body)", allowed);
  }

  /** The answer to a request no route takes. */
  HttpError notFound() {
    return new HttpError(404, "not_found", "no route " + method + " " + path);
  }

  int intParam(String name, int dflt) {
    String v = query.get(name);
    if (v == null) {
      return dflt;
    }
    try {
      return Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw bad(name, name + " must be an integer, was '" + clip(v) + "'");
    }
  }

  long longParam(String name) {
    String v = query.get(name);
    try {
      return Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw bad(name, name + " must be an integer, was '" + clip(v) + "'");
    }
  }

  boolean boolParam(String name, boolean dflt) {
    String v = query.get(name);
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
}
