package io.queen;

/**
 * Thrown by a handler to say that a message can never succeed (a malformed order, a customer that no
 * longer exists): the consume loop moves it to the dead-letter queue at once, with {@code reason} as its
 * error, without spending the queue's retries, and goes on with the partition's next message.
 *
 * <pre>{@code
 * queen.queue("orders").group("billing").consume(msg -> {
 *   Order o = msg.payload(Order.class);
 *   if (o.amount() < 0) {
 *     throw new DeadLetterException("negative amount");
 *   }
 *   charge(o);
 * });
 * }</pre>
 *
 * <p>In {@link MessageHandler} and {@link TransactionalHandler} (nothing of the handler's bundle is
 * applied). In the batch handlers, which cannot say which message of the batch is the bad one, it fails
 * the batch like any other exception: use a per-message handler where poison messages are expected.
 * With a manual {@code pop()}, acknowledge with {@link AckStatus#DEAD_LETTER} instead.
 */
public final class DeadLetterException extends QueenException {
  private static final long serialVersionUID = 1L;

  /** @param reason kept as the dead letter's error; say why, not what the payload held */
  public DeadLetterException(String reason) {
    super(reason);
  }

  /** @param reason kept as the dead letter's error; say why, not what the payload held */
  public DeadLetterException(String reason, Throwable cause) {
    super(reason, cause);
  }
}
