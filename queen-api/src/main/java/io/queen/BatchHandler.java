package io.queen;

import java.util.List;

/**
 * Handles one popped batch. Returning normally acknowledges all of it; throwing fails the first
 * message of each partition in the batch (the rest is redelivered with it).
 */
@FunctionalInterface
public interface BatchHandler {
  void handle(List<Message> batch) throws Exception;
}
