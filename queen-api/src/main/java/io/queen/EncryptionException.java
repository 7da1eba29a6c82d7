package io.queen;

/**
 * A queue with {@code encryption} on cannot be served by this node: it has no encryption key, or not the key
 * a stored message was sealed with. Nothing was pushed, and popped messages were given back without counting
 * an attempt. The message says what, which queue, and how to fix it (the node's {@code encryptionKey} /
 * {@code QUEEN_ENCRYPTION_KEY}, or the older key in {@code oldEncryptionKeys} after a rotation); it never
 * contains a payload or a key.
 */
public final class EncryptionException extends QueenException {
  private static final long serialVersionUID = 1L;

  private final String queue;

  public EncryptionException(String queue, String message) {
    super(message);
    this.queue = queue;
  }

  /** The queue concerned. */
  public String queue() {
    return queue;
  }
}
