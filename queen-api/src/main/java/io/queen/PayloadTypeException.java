package io.queen;

/**
 * A typed message could not be read as the requested class: it is of another type, of a newer schema version
 * than the class understands, of an older version with no upcaster to bridge the gap, or an upcaster failed.
 * Thrown by {@link Message#payload(Class)}; from a handler it fails the message like any exception, so it
 * follows the queue's {@code retryLimit} and dead-letter rules: never silently dropped, never parsed blindly.
 * The message is never lost: deploy a consumer that understands the version and redrive the dead letters.
 *
 * <p>The message text names the message, the stored type and version and what the reader understands; never
 * the payload.
 */
public final class PayloadTypeException extends QueenException {
  private static final long serialVersionUID = 1L;

  /** Why the read was refused. */
  public enum Reason {
    /** The message's stored type name is not the class's type name. */
    OTHER_TYPE,
    /** The message's version is newer than the class understands: deploy a newer consumer. */
    NEWER_VERSION,
    /** The message's version is older and an upcaster of the chain to the class's version is missing. */
    NO_UPCASTER,
    /** An upcaster of the chain threw. */
    UPCASTER_FAILED
  }

  private final Reason reason;
  private final String storedType;
  private final int storedVersion;
  private final String expectedType;
  private final int understoodVersion;

  public PayloadTypeException(Reason reason, String storedType, int storedVersion, String expectedType,
      int understoodVersion, String message) {
    super(message);
    this.reason = reason;
    this.storedType = storedType;
    this.storedVersion = storedVersion;
    this.expectedType = expectedType;
    this.understoodVersion = understoodVersion;
  }

  public Reason reason() {
    return reason;
  }

  /** The type name stored with the message. */
  public String storedType() {
    return storedType;
  }

  /** The schema version stored with the message. */
  public int storedVersion() {
    return storedVersion;
  }

  /** The type name of the requested class. */
  public String expectedType() {
    return expectedType;
  }

  /** The schema version the requested class understands. */
  public int understoodVersion() {
    return understoodVersion;
  }
}
