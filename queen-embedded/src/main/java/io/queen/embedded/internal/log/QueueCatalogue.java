package io.queen.embedded.internal.log;

import io.queen.Queen;
import io.queen.QueueConfig;
import io.queen.embedded.internal.db.Sql;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.sql.DataSource;

/**
 * The queue catalogue: whether a queue exists, its configuration (read, stored), deleting a queue, seeking, checking
 * and deleting a consumer group, and what this node keeps in memory of queues and groups (forgotten with them).
 */
public final class QueueCatalogue {
  private final DataSource ds;
  private final String schema;
  private final Wakeups wakeups;
  private final Metrics metrics;
  private final GroupActivity activity;
  private final EncryptionViews encryption;
  private final PopPositions positions;

  QueueCatalogue(LogContext log, GroupActivity activity, EncryptionViews encryption, PopPositions positions) {
    this.ds = log.ds();
    this.schema = log.schema();
    this.wakeups = log.wakeups();
    this.metrics = log.metrics();
    this.activity = activity;
    this.encryption = encryption;
    this.positions = positions;
  }

  /** Whether the queue exists (created by a push or by configure). */
  public boolean queueExists(String queue) {
    return Sql.autoCommit(ds, "queue exists", c -> {
      try (PreparedStatement st = c.prepareStatement("select 1 from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next();
        }
      }
    });
  }

  /** The queue's configuration, or the defaults when it does not exist. */
  public QueueConfig config(String queue) {
    return Sql.autoCommit(ds, "config", c -> {
      try (PreparedStatement st = c.prepareStatement("select lease_time_ms, retry_limit, retry_delay_ms, dead_letter,"
          + " delayed_processing_ms, window_buffer_ms, max_size, retention_ms, completed_retention_ms,"
          + " allow_drop_past_committed, pending_alert_after_ms, encryption from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        try (ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            return QueueConfig.DEFAULTS;
          }
          return readConfig(rs, 1, 12);
        }
      }
    });
  }

  /** A queue's configuration from the columns at {@code col} (in the order of {@link #config}) and {@code encCol}. */
  public static QueueConfig readConfig(ResultSet rs, int col, int encCol) throws SQLException {
    return new QueueConfig(Duration.ofMillis(rs.getLong(col)), rs.getInt(col + 1), Duration.ofMillis(rs.getLong(col + 2)),
        rs.getBoolean(col + 3), Duration.ofMillis(rs.getLong(col + 4)), Duration.ofMillis(rs.getLong(col + 5)),
        rs.getLong(col + 6), Duration.ofMillis(rs.getLong(col + 7)), Duration.ofMillis(rs.getLong(col + 8)),
        rs.getBoolean(col + 9), Duration.ofMillis(rs.getLong(col + 10)), rs.getBoolean(encCol));
  }

  /** Creates the queue if needed and stores the configuration. */
  public void configure(String queue, QueueConfig cfg) {
    Sql.inTransaction(ds, "configure", c -> {
      try (PreparedStatement st = c.prepareStatement("insert into " + schema + ".queues as q (name, lease_time_ms,"
          + " retry_limit, retry_delay_ms, dead_letter, delayed_processing_ms, window_buffer_ms, max_size, retention_ms,"
          + " completed_retention_ms, allow_drop_past_committed, pending_alert_after_ms, encryption)"
          + " values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (name) do update set lease_time_ms = excluded.lease_time_ms,"
          + " retry_limit = excluded.retry_limit, retry_delay_ms = excluded.retry_delay_ms,"
          + " dead_letter = excluded.dead_letter, delayed_processing_ms = excluded.delayed_processing_ms,"
          + " window_buffer_ms = excluded.window_buffer_ms, max_size = excluded.max_size,"
          + " retention_ms = excluded.retention_ms, completed_retention_ms = excluded.completed_retention_ms,"
          + " allow_drop_past_committed = excluded.allow_drop_past_committed,"
          + " pending_alert_after_ms = excluded.pending_alert_after_ms, encryption = excluded.encryption")) {
        st.setString(1, queue);
        st.setLong(2, cfg.leaseTime().toMillis());
        st.setInt(3, cfg.retryLimit());
        st.setLong(4, cfg.retryDelay().toMillis());
        st.setBoolean(5, cfg.deadLetter());
        st.setLong(6, cfg.delayedProcessing().toMillis());
        st.setLong(7, cfg.windowBuffer().toMillis());
        st.setLong(8, cfg.maxSize());
        st.setLong(9, cfg.retention().toMillis());
        st.setLong(10, cfg.completedRetention().toMillis());
        st.setBoolean(11, cfg.allowDropPastCommitted());
        st.setLong(12, cfg.pendingAlertAfter().toMillis());
        st.setBoolean(13, cfg.encryption());
        st.executeUpdate();
      }
      return null;
    });
    encryption.forget(queue);
  }

  /**
   * Deletes a queue and everything in it. The queue row and then its partition rows (in id order) are locked first,
   * as a push and the retention janitor take them, before any message row: without that, a retention step holding a
   * partition while it deleted that partition's prefix and this delete holding the messages deadlocked (40P01), and
   * under a janitor that keeps level with ingest every retry met the next step.
   */
  public void deleteQueue(String queue) {
    Sql.inTransaction(ds, "delete queue", c -> {
      Sql.noJit(c); // the delete's estimate grows with the queue: a server with JIT would compile it
      try (PreparedStatement st = c.prepareStatement("select p.id from " + schema + ".partitions p where p.queue_id ="
          + " (select q.id from " + schema + ".queues q where q.name = ? for update) order by p.id for update")) {
        st.setString(1, queue);
        st.executeQuery().close();
      }
      try (PreparedStatement st = c.prepareStatement("delete from " + schema + ".messages where partition_id in"
          + " (select p.id from " + schema + ".partitions p join " + schema + ".queues q on q.id = p.queue_id"
          + " where q.name = ?)")) {
        st.setString(1, queue);
        st.executeUpdate();
      }
      try (PreparedStatement st = c.prepareStatement("delete from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        st.executeUpdate();
      }
      return null;
    });
    forgetQueue(queue);
  }

  /** How many queue and group names this node holds in memory, by map. */
  Map<String, Integer> namesHeld() {
    return Map.of("encryptionViews", encryption.size(), "popPositions", positions.size(),
        "signals", wakeups.signalsHeld(), "listenerSets", wakeups.listenerSetsHeld());
  }

  /**
   * The queue names this node keeps something of in memory: options views, pop positions, wake-up signals, meters.
   * The group watch compares them with the queues that exist, to forget the ones another node deleted.
   */
  public Set<String> queuesHeld() {
    Set<String> out = new java.util.HashSet<>(encryption.queues());
    out.addAll(positions.queues());
    out.addAll(wakeups.signalQueues());
    out.addAll(metrics.queuesMetered());
    return out;
  }

  /** Forgets a queue another node deleted (the group watch saw it missing twice), as {@link #deleteQueue} does here. */
  public void forgetDeletedElsewhere(String queue) {
    forgetQueue(queue);
  }

  /** Forgets a group that is gone (deleted here or elsewhere): its pop positions and its meters. */
  public void forgetGroup(String queue, String group) {
    positions.forgetGroup(queue, group);
    metrics.groupDeleted(queue, group);
  }

  /**
   * What this node keeps in memory of a queue it deleted: its options, its pop positions, its wake-up signal, its
   * meters. Without this every queue ever created and deleted under a new name (per-tenant or temporary queues) stayed
   * in those maps and some twenty meters for the node's life (a soak: about 790 meters per 100 queues and groups).
   */
  private void forgetQueue(String queue) {
    encryption.forget(queue);
    positions.forgetQueue(queue);
    wakeups.forget(queue);
    metrics.queueDeleted(queue);
  }

  /** Moves a group's cursors: mode BEGINNING, END or TIME. */
  public int seek(String queue, String group, String mode, Instant at) {
    activity.touch(queue, group);
    return Sql.inTransaction(ds, "seek", c -> {
      requireGroup(c, queue, group);
      try (PreparedStatement st = c.prepareStatement("select " + schema + ".seek(?, ?, ?, ?)")) {
        st.setString(1, queue);
        st.setString(2, group);
        st.setString(3, mode);
        st.setTimestamp(4, at == null ? null : Timestamp.from(at));
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          return rs.getInt(1);
        }
      }
    });
  }

  /**
   * Refuses a seek of a queue or group that does not exist: the seek would otherwise subscribe a misspelt group,
   * which then holds back retention for its queue until someone deletes it. Names up to ten of the queue's groups.
   */
  private void requireGroup(Connection c, String queue, String group) throws SQLException {
    requireGroup(c, queue, group, "seek", "nothing was moved", "; seek moves the cursors of a group that exists. A new"
        + " group starts where subscription(...) or subscriptionFrom(...) says when it first consumes. Nothing was"
        + " created or moved");
  }

  /**
   * Refuses an action on the dead letters of a queue or group that does not exist, so that a misspelt name is not
   * read as an empty dead-letter queue. The default group needs only its queue.
   */
  public void requireGroup(String queue, String group, String action) {
    Sql.autoCommit(ds, action, c -> {
      requireGroup(c, queue, group, action, "nothing was done", "; nothing was done");
      return null;
    });
  }

  private void requireGroup(Connection c, String queue, String group, String action, String noQueue, String tail)
      throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select q.id, exists (select 1 from " + schema
        + ".consumer_groups g where g.queue_id = q.id and g.name = ?), array(select g.name from " + schema
        + ".consumer_groups g where g.queue_id = q.id order by g.name limit 10) from " + schema
        + ".queues q where q.name = ? for key share of q")) {
      st.setString(1, group);
      st.setString(2, queue);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          throw new IllegalArgumentException(action + ": queue '" + queue + "' does not exist; " + noQueue);
        }
        boolean needsNoRow = !"seek".equals(action) && Queen.DEFAULT_GROUP.equals(group);
        if (!rs.getBoolean(2) && !needsNoRow) {
          String[] known = (String[]) rs.getArray(3).getArray();
          throw new IllegalArgumentException(action + ": group '" + group + "' has never consumed queue '" + queue
              + "' (its groups: " + (known.length == 0 ? "none" : String.join(", ", known)) + ")" + tail);
        }
      }
    }
  }

  /** Forgets a consumer group of a queue. */
  public void deleteGroup(String queue, String group) {
    deleteGroup(queue, group, -1);
  }

  /**
   * Removes a consumer group that has been idle longer than {@code idleMillis} (its {@code last_active_at}, read again
   * under the queue's lock); returns whether it did.
   */
  public boolean expireGroup(String queue, String group, long idleMillis) {
    return deleteGroup(queue, group, idleMillis);
  }

  /** Deletes the group; with {@code idleMillis >= 0}, only when it is still that idle. */
  private boolean deleteGroup(String queue, String group, long idleMillis) {
    boolean deleted = Sql.inTransaction(ds, "delete group", c -> {
      // the queue row first, FOR UPDATE, as ensure_group takes it: a push that creates a partition holds KEY SHARE on
      // it (the foreign key) until it commits, and inserts the new partition's cursors, one per group it sees, in a
      // later statement. Without the lock such a push could add a cursor of this group after the delete below had
      // passed, and the orphan (at offset -1) held the partition's messages from retention for good.
      try (PreparedStatement st = c.prepareStatement("select 1 from " + schema + ".queues where name = ? for update")) {
        st.setString(1, queue);
        st.executeQuery().close();
      }
      if (idleMillis >= 0) {
        try (PreparedStatement st = c.prepareStatement("select 1 from " + schema + ".consumer_groups g join " + schema
            + ".queues q on q.id = g.queue_id where q.name = ? and g.name = ?"
            + " and g.last_active_at < now() - ? * interval '1 millisecond'")) {
          st.setString(1, queue);
          st.setString(2, group);
          st.setLong(3, idleMillis);
          try (ResultSet rs = st.executeQuery()) {
            if (!rs.next()) {
              return false; // used meanwhile
            }
          }
        }
      }
      String q = "(select id from " + schema + ".queues where name = ?)";
      for (String sql : List.of(
          "delete from " + schema + ".redeliveries r using " + schema + ".partitions p where p.id = r.partition_id"
              + " and p.queue_id = " + q + " and r.group_name = ?",
          "delete from " + schema + ".cursors where queue_id = " + q + " and group_name = ?",
          "delete from " + schema + ".dead_letters where queue_id = " + q + " and group_name = ?",
          "delete from " + schema + ".consumer_groups where queue_id = " + q + " and name = ?")) {
        try (PreparedStatement st = c.prepareStatement(sql)) {
          st.setString(1, queue);
          st.setString(2, group);
          st.executeUpdate();
        }
      }
      return true;
    });
    if (deleted) {
      forgetGroup(queue, group);
    }
    return deleted;
  }
}
