package io.queen;

import java.util.Objects;

/**
 * JSON text to be stored as it is (after Queen has checked that it parses). Use it to push a payload
 * you already hold as JSON, instead of a {@code String} (which would be stored as a JSON string).
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
