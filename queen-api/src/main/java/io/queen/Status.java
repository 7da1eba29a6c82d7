package io.queen;

import java.time.Duration;
import java.time.Instant;
import java.util.List;

/**
 * A snapshot of the broker as the database sees it.
 *
 * @param takenAt database time of the snapshot
 * @param queues every queue
 * @param connectors every connector as this node sees it (its phase here, this node's counters; the same as
 *     {@code connectors().status()}); empty on a node without queen-pgconn
 */
public record Status(Instant takenAt, List<QueueStatus> queues, List<ConnectorStatus> connectors) {
  public Status {
    queues = List.copyOf(queues);
    connectors = List.copyOf(connectors);
  }

  /** A snapshot without connectors. */
  public Status(Instant takenAt, List<QueueStatus> queues) {
    this(takenAt, queues, List.of());
  }

  /** The connector's entry, if it exists. */
  public ConnectorStatus connector(String name) {
    return connectors.stream().filter(c -> c.name().equals(name)).findFirst().orElse(null);
  }

  /** One queue. {@code messages} counts the stored messages. */
  public record QueueStatus(String name, QueueConfig config, long partitions, long messages, List<GroupStatus> groups) {}

  /**
   * One consumer group of a queue.
   *
   * @param lag messages stored after the group's cursors, over all partitions
   * @param pendingAge age of the oldest message the group has not consumed ({@link Duration#ZERO} when none)
   * @param leases partitions currently leased by consumers of this group
   * @param deadLetters dead-letter rows of this group
   */
  public record GroupStatus(String name, long lag, Duration pendingAge, long leases, long deadLetters) {}

  /** The queue's entry, if it exists. */
  public QueueStatus queue(String name) {
    return queues.stream().filter(q -> q.name().equals(name)).findFirst().orElse(null);
  }
}
