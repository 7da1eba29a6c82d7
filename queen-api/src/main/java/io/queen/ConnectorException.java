package io.queen;

/**
 * A connector operation that cannot be done on this node, with a code from the closed set documented in
 * the queen-pgconn README (for example {@code no_encryption_key}, {@code wrong_encryption_key}) and a
 * sentence naming the fix.
 */
public final class ConnectorException extends QueenException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public ConnectorException(String code, String message) {
    super(message);
    this.code = code;
  }

  /** The error code, e.g. {@code no_encryption_key}. */
  public String code() {
    return code;
  }
}
