package io.queen;

/** A push was refused because it would take the queue above its configured {@code maxSize}. */
public final class QueueFullException extends QueenException {
  private static final long serialVersionUID = 1L;
  private final String queue;
  private final long maxSize;

  /**
   * @param detail what the push found, such as {@code "0 stored + 3 pushed"}, or {@code null} when not known
   */
  public QueueFullException(String queue, long maxSize, String detail) {
    super("queue '" + queue + "' is full: " + (detail == null ? "" : detail + " > ") + "maxSize " + maxSize
        + "; nothing of the batch was stored");
    this.queue = queue;
    this.maxSize = maxSize;
  }

  public String queue() {
    return queue;
  }

  public long maxSize() {
    return maxSize;
  }
}
