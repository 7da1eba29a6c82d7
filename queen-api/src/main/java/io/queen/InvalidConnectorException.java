package io.queen;

/**
 * A connector name or document was refused before anything was stored. The message names the field path
 * ({@code sink.mode}), what was given and what is allowed; it never repeats a password.
 */
public final class InvalidConnectorException extends QueenException {
  private static final long serialVersionUID = 1L;
  private final String field;

  public InvalidConnectorException(String field, String message) {
    super(message);
    this.field = field;
  }

  /** The path of the first field refused, e.g. {@code sink.mode} ({@code name} for the connector's name). */
  public String field() {
    return field;
  }
}
