package io.queen;

import java.util.List;
import java.util.function.UnaryOperator;

/**
 * Operations on one queue. Cheap to create; holds no state besides the name; thread-safe.
 */
public interface QueueClient {
  String name();

  /**
   * Creates the queue if needed and changes its configuration: the function receives a builder holding
   * the current values. Validation happens before anything is written.
   */
  QueueConfig configure(UnaryOperator<QueueConfig.Builder> change);

  /** The current configuration ({@link QueueConfig#DEFAULTS} for a queue that does not exist yet). */
  QueueConfig config();

  /** A handle on one partition of this queue. */
  PartitionClient partition(String partition);

  /** Pushes one payload to the {@link Queen#DEFAULT_PARTITION default partition}. */
  PushResult push(Object payload);

  /** Pushes items to their partitions of this queue, in one transaction; results in request order. */
  List<PushResult> push(List<PushItem> items);

  /** A consumer on this queue's default group (competing consumers, reads from the beginning). */
  ConsumerBuilder consumer();

  /** A consumer on a named group (its own cursor per partition). */
  ConsumerBuilder group(String group);

  /** Deletes the queue with all its partitions, messages, cursors and dead letters. */
  void delete();
}
