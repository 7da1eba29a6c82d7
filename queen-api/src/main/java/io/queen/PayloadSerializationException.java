package io.queen;

/**
 * A payload could not be turned into JSON (on push) or JSON could not be turned into the requested
 * type (on {@link Message#payload(Class)}). The message names the field and the type; it never
 * contains the payload itself.
 */
public final class PayloadSerializationException extends QueenException {
  private static final long serialVersionUID = 1L;

  public PayloadSerializationException(String message, Throwable cause) {
    super(message, cause);
  }
}
