package io.queen;

/**
 * Handles one message of a subscription. Returning normally acknowledges it; throwing fails it (the
 * exception's message is recorded as its error) and it is redelivered after the queue's retry delay,
 * or dead-lettered after the retry limit.
 */
@FunctionalInterface
public interface MessageHandler {
  void handle(Message message) throws Exception;
}
