package io.queen;

/**
 * Root of every exception Queen throws on purpose. Unchecked: a broker failure is not something a
 * caller can usually handle at the call site; it belongs in the application's error handling.
 *
 * <p>Lost races (a KV precondition, a lease taken over by another consumer) are <em>results</em>,
 * never exceptions: see {@link CommitResult} and {@link AckResult}.
 */
public abstract class QueenException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  protected QueenException(String message) {
    super(message);
  }

  protected QueenException(String message, Throwable cause) {
    super(message, cause);
  }
}
