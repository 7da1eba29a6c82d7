package io.queen;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * A snapshot of the broker as the database sees it.
 *
 * @param takenAt database time of the snapshot
 * @param queues every queue
 * @param connectors every connector as this node sees it (its phase here, this node's counters; the same as
 *     {@code connectors().status()}); empty on a node without queen-pgconn
 * @param nodes every node with a heartbeat row (a node that closed cleanly has none), by id
 */
public record Status(Instant takenAt, List<QueueStatus> queues, List<ConnectorStatus> connectors,
    List<NodeStatus> nodes) {
  public Status {
    queues = List.copyOf(queues);
    connectors = List.copyOf(connectors);
    nodes = List.copyOf(nodes);
  }

  public Status(Instant takenAt, List<QueueStatus> queues, List<ConnectorStatus> connectors) {
    this(takenAt, queues, connectors, List.of());
  }

  /** A snapshot without connectors. */
  public Status(Instant takenAt, List<QueueStatus> queues) {
    this(takenAt, queues, List.of());
  }

  /** The connector's entry, if it exists. */
  public ConnectorStatus connector(String name) {
    return connectors.stream().filter(c -> c.name().equals(name)).findFirst().orElse(null);
  }

  /**
   * One queue. {@code messages} counts the stored messages.
   *
   * @param retention what the retention janitor's last pass saw, or null when the queue has no retention or no
   *     pass has looked at it yet
   * @param waitingForKey messages that wait for a key the node that read this status does not hold, by key id: in
   *     each partition of a queue that has had {@code encryption} on, whose next message for its furthest-behind
   *     group is sealed under such a key, that message and every one after it (a pop leases no such partition, so
   *     they wait there for a node with the key). Empty when none wait
   * @param pushed messages ever pushed to the queue's partitions that exist now (the sum of their next offsets): it
   *     only grows while no partition is removed, so two readings apart give the push rate
   */
  public record QueueStatus(String name, QueueConfig config, long partitions, long messages, List<GroupStatus> groups,
      RetentionStatus retention, Map<String, Long> waitingForKey, long pushed) {
    public QueueStatus {
      groups = List.copyOf(groups);
      waitingForKey = Map.copyOf(waitingForKey);
    }

    /** A queue with no message waiting for a key and no count of pushes. */
    public QueueStatus(String name, QueueConfig config, long partitions, long messages, List<GroupStatus> groups,
        RetentionStatus retention) {
      this(name, config, partitions, messages, groups, retention, Map.of(), 0);
    }

    /** A queue without retention status. */
    public QueueStatus(String name, QueueConfig config, long partitions, long messages, List<GroupStatus> groups) {
      this(name, config, partitions, messages, groups, null);
    }

    /** The messages waiting for a key, over every key id ({@link #waitingForKey()}). */
    public long messagesWaitingForKey() {
      return waitingForKey.values().stream().mapToLong(Long::longValue).sum();
    }

    /** The group's entry, if it exists. */
    public GroupStatus group(String name) {
      return groups.stream().filter(g -> g.name().equals(name)).findFirst().orElse(null);
    }
  }

  /**
   * Retention of one queue as the janitor's last pass saw it (docs/retention.md).
   *
   * @param oldestKeptAt creation time of the oldest message still stored (null when the queue is empty)
   * @param oldestPartition its partition
   * @param oldestOffset its offset
   * @param heldBy the consumer group whose cursor keeps it although it is old enough to go (null when it is kept
   *     because it is younger than the retention)
   * @param checkedAt database time of that pass
   */
  public record RetentionStatus(Instant oldestKeptAt, String oldestPartition, Long oldestOffset, String heldBy,
      Instant checkedAt) {}

  /**
   * Messages a group lost in one partition because retention removed them before the group consumed them
   * ({@code allowDropPastCommitted}).
   *
   * @param partition the partition
   * @param messages how many, over every drop in this partition
   * @param upToOffset the highest offset lost in the latest drop: the group resumed after it
   * @param at when the latest drop happened (database time)
   */
  public record Loss(String partition, long messages, long upToOffset, Instant at) {}

  /**
   * One consumer group of a queue.
   *
   * @param lag messages stored after the group's cursors, over all partitions
   * @param pendingAge age of the oldest message the group has not consumed ({@link Duration#ZERO} when none)
   * @param leases partitions currently leased by consumers of this group: a lease that has expired, or whose node
   *     stopped heartbeating more than its session timeout ago (a crashed node's, free for any consumer to take), is
   *     not counted
   * @param deadLetters dead-letter rows of this group
   * @param pendingAlert whether {@code pendingAge} is past the queue's {@code pendingAlertAfter}
   * @param lostMessages messages retention removed before this group consumed them, over all partitions
   * @param losses where they were lost, the latest {@value #MAX_LOSSES} partitions first
   */
  public record GroupStatus(String name, long lag, Duration pendingAge, long leases, long deadLetters,
      boolean pendingAlert, long lostMessages, List<Loss> losses) {
    /** The most partitions {@link #losses()} lists. */
    public static final int MAX_LOSSES = 100;

    public GroupStatus {
      losses = List.copyOf(losses);
    }

    /** A group without alarm and without losses. */
    public GroupStatus(String name, long lag, Duration pendingAge, long leases, long deadLetters) {
      this(name, lag, pendingAge, leases, deadLetters, false, 0, List.of());
    }
  }

  /** The queue's entry, if it exists. */
  /**
   * A node of the cluster as its heartbeat row shows it: {@code alive} while its heartbeat is within its session
   * timeout (a node that closed cleanly has no row), and the partition leases it holds now (live leases on partitions
   * with work, as {@link GroupStatus#leases()} counts them).
   */
  public record NodeStatus(String id, Instant startedAt, Instant heartbeatAt, boolean alive, String version,
      long leases) {}

  /**
   * One partition of a queue ({@link QueueClient#partitions(String, int)}): its offsets (the next offset to hand out
   * is also how many messages it has ever taken), the time of its last message, and each group's cursor.
   */
  public record PartitionStatus(String name, long id, long firstOffset, long nextOffset, Instant lastMessageAt,
      List<CursorStatus> cursors) {
    public PartitionStatus {
      cursors = List.copyOf(cursors);
    }
  }

  /**
   * A group's cursor on one partition: everything up to {@code committedOffset} is done, {@code lag} messages are
   * after it, and the lease (owner node and expiry) when one is live; {@code attempts} of the head message.
   */
  public record CursorStatus(String group, long committedOffset, long lag, String leaseOwner, Instant leaseExpiresAt,
      int attempts) {}

  public QueueStatus queue(String name) {
    return queues.stream().filter(q -> q.name().equals(name)).findFirst().orElse(null);
  }
}
