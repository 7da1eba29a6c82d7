package io.queen.embedded.internal.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** An answer: a status, and a JSON tree, a page or nothing. */
record Reply(int status, String contentType, byte[] body) {
  static Reply json(int status, JsonNode node) {
    try {
      return new Reply(status, "application/json; charset=utf-8", Views.OUT.writeValueAsBytes(node));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("JSON answer could not be written", e);
    }
  }

  static Reply ok(JsonNode node) {
    return json(200, node);
  }

  static Reply error(int status, String code, String message, String field) {
    ObjectNode n = Views.OUT.createObjectNode().put("error", message).put("code", code);
    if (field != null) {
      n.put("field", field);
    }
    return json(status, n);
  }
}
