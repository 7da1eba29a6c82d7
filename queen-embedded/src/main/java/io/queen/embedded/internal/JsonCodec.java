package io.queen.embedded.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.Json;
import io.queen.PayloadSerializationException;

/** Payloads and KV values to and from JSON text, with the node's {@link ObjectMapper}. */
public final class JsonCodec {
  private final ObjectMapper mapper;

  public JsonCodec(ObjectMapper mapper) {
    this.mapper = mapper;
  }

  public ObjectMapper mapper() {
    return mapper;
  }

  /**
   * JSON text of a payload: a {@link Json} is parsed to check it and passed through; a {@link JsonNode}
   * or any other object is serialised.
   *
   * @param field names the value in the error message, e.g. {@code items[3].payload}
   */
  public String toJson(Object value, String field) {
    try {
      if (value instanceof Json j) {
        mapper.readTree(j.text()); // validate; keep the caller's text as is
        return j.text();
      }
      return mapper.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new PayloadSerializationException(field + " is not valid JSON / not serialisable: "
          + e.getOriginalMessage(), e);
    }
  }

  /** Parses JSON text read from the database. */
  public JsonNode parse(String text) {
    if (text == null) {
      return null;
    }
    try {
      return mapper.readTree(text);
    } catch (JsonProcessingException e) {
      throw new PayloadSerializationException("stored JSON cannot be parsed: " + e.getOriginalMessage(), e);
    }
  }
}
