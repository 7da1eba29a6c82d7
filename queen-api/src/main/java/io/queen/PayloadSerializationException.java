package io.queen;

/**
 * A payload could not be turned into JSON (on push) or JSON could not be turned into the requested
 * type (on {@link Message#payload(Class)}). The message names the field and the type; it never
 * contains the payload itself.
 *
 * <p>On push (and for KV values) it is thrown before any SQL when the JSON text is larger than the
 * node's {@code maxPayloadBytes}, or is not exactly one standard JSON document that PostgreSQL's jsonb
 * and Queen's reader both accept: empty text, trailing text or a second value, a NUL character (raw
 * or as the escape {@code \u0000}), an unpaired surrogate, nesting or numbers beyond the reader's
 * limits. The field is named as {@code items[3].payload} (push), {@code operations[2].payload}
 * (a transaction, in build order) or {@code value} (KV); a position, never the text, says where.
 * Such an exception has no cause: the parser's own message would quote the input.
 */
public final class PayloadSerializationException extends QueenException {
  private static final long serialVersionUID = 1L;

  public PayloadSerializationException(String message, Throwable cause) {
    super(message, cause);
  }
}
