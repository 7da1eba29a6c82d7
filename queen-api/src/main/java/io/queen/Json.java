package io.queen;

import java.util.Objects;

/**
 * JSON text to be stored as it is (after Queen has checked that it parses). Use it to push a payload
 * you already hold as JSON. A plain {@code String} is stored as a JSON string, except one that holds the JSON
 * text of an object or an array: that is refused with a {@link PayloadSerializationException} pointing here,
 * since it is nearly always a {@code Json.of(...)} forgotten.
 *
 * @param text the JSON document
 */
public record Json(String text) {
  public Json {
    Objects.requireNonNull(text, "text must not be null");
  }

  public static Json of(String text) {
    return new Json(text);
  }

  @Override
  public String toString() {
    return "Json[" + text.length() + " chars]";
  }
}
