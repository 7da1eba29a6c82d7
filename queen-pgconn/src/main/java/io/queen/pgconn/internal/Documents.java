package io.queen.pgconn.internal;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The registry's document validation for the public document builders ({@code io.queen.pgconn.PgConnectors}):
 * the very checks {@code queen.connectors().put} runs, with the same field paths and messages.
 */
public final class Documents {
  private Documents() {}

  /** Validates {@code document} for connector {@code name}; throws {@link io.queen.InvalidConnectorException}. */
  public static void validate(String name, JsonNode document) {
    DocumentValidator.validate(name, document);
  }
}
