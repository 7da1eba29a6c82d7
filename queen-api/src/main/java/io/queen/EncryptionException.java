package io.queen;

/**
 * A queue with {@code encryption} on cannot be served by this node, or this node's key is not one of the cluster's.
 * Either it has no encryption key; or its key is not one the cluster has adopted (then the node refuses to start, or
 * refuses to seal a push while the cluster has adopted no key yet), and nothing was started or pushed; or it lacks
 * the key a stored message was sealed with, and popped messages were given back without counting an attempt. The
 * message says what, which queue or which key ids, and how to fix it (the node's {@code encryptionKey} /
 * {@code QUEEN_ENCRYPTION_KEY}, the older key in {@code oldEncryptionKeys}, or {@code adoptEncryptionKey()}); it
 * names keys by their ids only and never contains a payload or a key.
 */
public final class EncryptionException extends QueenException {
  private static final long serialVersionUID = 1L;

  private final String queue;

  public EncryptionException(String queue, String message) {
    super(message);
    this.queue = queue;
  }

  /** An error that concerns the node's keys rather than one queue (a start refused); {@link #queue()} is null. */
  public EncryptionException(String message) {
    this(null, message);
  }

  /** The queue concerned, or null when the error concerns the node's keys (a refused start). */
  public String queue() {
    return queue;
  }
}
