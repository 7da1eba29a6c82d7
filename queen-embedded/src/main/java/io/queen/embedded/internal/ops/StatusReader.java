package io.queen.embedded.internal.ops;

import io.queen.QueueConfig;
import io.queen.Status;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.QueueCatalogue;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;

/**
 * Reads the {@link Status} snapshot in one repeatable-read transaction, and the per-group lag figures the gauges
 * export ({@link #lag}).
 */
public final class StatusReader {
  private final DataSource ds;
  private final String s;
  private final String lagSql;
  private final String waitingSql;
  /** The ids of the keys this node holds: a message sealed under another waits for a node that holds it. */
  private final String[] keyIds;

  /** One group's lag: messages after its cursors, and the age of its oldest pending message. */
  record GroupLag(long queueId, String queue, String group, long lag, Duration pendingAge, Duration alertAfter) {
    boolean alert() {
      return !alertAfter.isZero() && pendingAge.compareTo(alertAfter) > 0;
    }
  }

  /**
   * @param keyIds the ids of the keys this node holds
   */
  public StatusReader(DataSource ds, String quotedSchema, java.util.Set<String> keyIds) {
    this.ds = ds;
    this.s = quotedSchema;
    this.keyIds = keyIds.toArray(new String[0]);
    // Only queues that have had encryption on (queues.sealed) can hold sealed messages. In each partition with work
    // for some group, the next message of the group furthest behind is looked up by key: sealed under a key this node
    // does not hold, it and every message after it wait (pop leases no such partition). Cost: a look-up per partition
    // with work in such queues, through cursors_ready, whatever the backlog.
    this.waitingSql = "select q.name, m.key_id, sum(p.next_offset - 1 - p.lo)::bigint"
        + " from " + s + ".queues q"
        + " cross join lateral (select c.partition_id, min(c.committed_offset) as committed from " + s + ".cursors c"
        + "   where c.queue_id = q.id and c.has_pending group by c.partition_id) cu"
        + " cross join lateral (select p0.next_offset, greatest(cu.committed, p0.first_offset - 1) as lo from " + s
        + ".partitions p0 where p0.id = cu.partition_id offset 0) p"
        + " cross join lateral (select m0.key_id from " + s + ".messages m0 where m0.partition_id = cu.partition_id"
        + "   and m0.\"offset\" = p.lo + 1 offset 0) m"
        + " where q.sealed and m.key_id is not null and not (m.key_id = any(?::text[]))"
        + " group by q.name, m.key_id";
    // Only the cursors flagged has_pending can be behind (push sets the flag on every cursor of its partition
    // that has it false; it is cleared only when the cursor is at the end, and only once the partition has
    // had no push for 100 ms), so this reads the cursors_ready index and costs in proportion to the partitions that
    // hold work for the group or were pushed to a moment ago, not to all partitions. Each such
    // cursor looks its partition and its next message up in lateral subqueries that cannot be flattened: a join the
    // planner may order freely read every partition and every message once per pending cursor while the statistics
    // said the tables were empty (after a vacuum of an emptied log; StaleStatisticsTest).
    this.lagSql = "select g.queue_id, q.name, g.name, q.pending_alert_after_ms, coalesce(x.lag, 0),"
        + " coalesce(extract(epoch from now() - x.oldest) * 1000, 0)::bigint"
        + " from " + s + ".consumer_groups g join " + s + ".queues q on q.id = g.queue_id"
        + " left join lateral (select sum(greatest(p.next_offset - 1 - greatest(c.committed_offset, p.first_offset - 1), 0)) as lag,"
        + "   min(m.created_at) as oldest"
        + "   from " + s + ".cursors c"
        + "   cross join lateral (select p0.next_offset, p0.first_offset from " + s + ".partitions p0"
        + "     where p0.id = c.partition_id offset 0) p"
        + "   left join lateral (select m0.created_at from " + s + ".messages m0 where m0.partition_id = c.partition_id"
        + "     and m0.\"offset\" = greatest(c.committed_offset, p.first_offset - 1) + 1 offset 0) m on true"
        + "   where c.queue_id = g.queue_id and c.group_name = g.name and c.has_pending) x on true"
        + " order by q.name, g.name";
  }

  /**
   * Every group's lag, read now, in the caller's transaction (it must be one: the plan setting below is for the
   * transaction).
   */
  List<GroupLag> lag(Connection c) throws SQLException {
    // Cursors are read through the partial index cursors_ready only: with statistics taken while most cursors had
    // work, the planner would cost a scan of every cursor row as cheaper, every GroupWatch period (StatusPlansTest).
    Sql.indexPlansOnly(c);
    List<GroupLag> out = new ArrayList<>();
    try (PreparedStatement st = c.prepareStatement(lagSql); ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        out.add(new GroupLag(rs.getLong(1), rs.getString(2), rs.getString(3), rs.getLong(5),
            Duration.ofMillis(Math.max(0, rs.getLong(6))), Duration.ofMillis(rs.getLong(4))));
      }
    }
    return out;
  }

  /**
   * The messages waiting for a key this node does not hold: queue name to key id to messages (see
   * {@link Status.QueueStatus#waitingForKey()}); only queues where some wait. Read in the caller's transaction.
   */
  Map<String, Map<String, Long>> waitingForKey(Connection c) throws SQLException {
    Map<String, Map<String, Long>> out = new HashMap<>();
    try (PreparedStatement st = c.prepareStatement(waitingSql)) {
      st.setArray(1, c.createArrayOf("text", keyIds));
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.computeIfAbsent(rs.getString(1), k -> new HashMap<>()).put(rs.getString(2), rs.getLong(3));
        }
      }
    }
    return out;
  }

  /** The messages waiting for a key this node does not hold, in their own read (see {@link #waitingForKey(Connection)}). */
  Map<String, Map<String, Long>> waitingForKey() {
    return Sql.inTransaction(ds, "messages waiting for a key", c -> {
      Sql.indexPlansOnly(c);
      return waitingForKey(c);
    });
  }

  /** Every group's lag, in its own read. */
  List<GroupLag> lag() {
    return Sql.inTransaction(ds, "group lag", this::lag);
  }

  public Status read() {
    return Sql.inTransaction(ds, "status", this::read);
  }

  /** The snapshot, read in the caller's transaction, which must not have run a statement yet. */
  Status read(Connection c) throws SQLException {
    try (PreparedStatement iso = c.prepareStatement("set transaction isolation level repeatable read read only")) {
      iso.execute();
    }
    Sql.indexPlansOnly(c);
    Instant now;
    try (PreparedStatement st = c.prepareStatement("select now()"); ResultSet rs = st.executeQuery()) {
      rs.next();
      now = rs.getTimestamp(1).toInstant();
    }
    Map<String, List<Status.Loss>> losses = new HashMap<>();
    Map<String, Long> lost = new HashMap<>();
    try (PreparedStatement st = c.prepareStatement("select l.queue_id, l.group_name, p.name, l.messages, l.up_to, l.at,"
        + " sum(l.messages) over w, row_number() over (w order by l.at desc, p.name)"
        + " from " + s + ".retention_losses l join " + s + ".partitions p on p.id = l.partition_id"
        + " window w as (partition by l.queue_id, l.group_name)");
        ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        String key = rs.getLong(1) + "\u0000" + rs.getString(2);
        lost.put(key, rs.getLong(7));
        if (rs.getLong(8) <= Status.GroupStatus.MAX_LOSSES) {
          losses.computeIfAbsent(key, k -> new ArrayList<>()).add(new Status.Loss(rs.getString(3), rs.getLong(4),
              rs.getLong(5), rs.getTimestamp(6).toInstant()));
        }
      }
    }
    Map<String, long[]> counts = new HashMap<>();
    try (PreparedStatement st = c.prepareStatement("select g.queue_id, g.name,"
        // a cursor is leased only while it has work (a pop leases only flagged cursors, and a flag is cleared only
        // with the lease released), so the count reads the cursors_ready index, not every cursor of the group
        + " (select count(*) from " + s + ".cursors c where c.queue_id = g.queue_id and c.group_name = g.name"
        + "   and c.has_pending and c.lease_id is not null and c.lease_expires_at > now()" // a dead owner's leases are free to take
        + "   and not exists (select 1 from " + s + ".nodes n where n.node_id = c.lease_owner and n.dead_after <= now())),"
        + " (select count(*) from " + s + ".dead_letters d where d.queue_id = g.queue_id and d.group_name = g.name)"
        + " from " + s + ".consumer_groups g");
        ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        counts.put(rs.getLong(1) + "\u0000" + rs.getString(2), new long[] {rs.getLong(3), rs.getLong(4)});
      }
    }
    Map<Long, List<Status.GroupStatus>> groups = new HashMap<>();
    for (GroupLag g : lag(c)) {
      String key = g.queueId() + "\u0000" + g.group();
      long[] n = counts.getOrDefault(key, new long[2]);
      List<Status.Loss> l = losses.getOrDefault(key, List.of());
      groups.computeIfAbsent(g.queueId(), k -> new ArrayList<>()).add(new Status.GroupStatus(g.group(), g.lag(),
          g.pendingAge(), n[0], n[1], g.alert(), lost.getOrDefault(key, 0L), l));
    }
    Map<String, Map<String, Long>> waiting = waitingForKey(c);
    List<Status.QueueStatus> queues = new ArrayList<>();
    try (PreparedStatement st = c.prepareStatement("select q.id, q.name, q.lease_time_ms, q.retry_limit,"
        + " q.retry_delay_ms, q.dead_letter, q.delayed_processing_ms, q.window_buffer_ms, q.max_size,"
        + " q.retention_ms, q.completed_retention_ms, q.allow_drop_past_committed, q.pending_alert_after_ms,"
        + " pc.n, pc.messages, pc.pushed,"
        + " r.oldest_at, r.oldest_partition, r.oldest_offset, r.held_by, r.checked_at, q.encryption"
        + " from " + s + ".queues q left join " + s + ".retention_state r on r.queue_id = q.id"
        // one pass over the queue's partitions for both figures
        + " cross join lateral (select count(*) as n, coalesce(sum(p.next_offset - p.first_offset), 0) as messages,"
        + "   coalesce(sum(p.next_offset), 0) as pushed"
        + "   from " + s + ".partitions p where p.queue_id = q.id) pc"
        + " order by q.name");
        ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        QueueConfig cfg = QueueCatalogue.readConfig(rs, 3, 22);
        Status.RetentionStatus retention = null;
        Timestamp checked = rs.getTimestamp(21);
        if (checked != null && (!cfg.retention().isZero() || !cfg.completedRetention().isZero())) {
          Timestamp oldest = rs.getTimestamp(17);
          long off = rs.getLong(19);
          Long offset = rs.wasNull() ? null : off;
          retention = new Status.RetentionStatus(oldest == null ? null : oldest.toInstant(), rs.getString(18),
              offset, rs.getString(20), checked.toInstant());
        }
        queues.add(new Status.QueueStatus(rs.getString(2), cfg, rs.getLong(14), rs.getLong(15),
            List.copyOf(groups.getOrDefault(rs.getLong(1), List.of())), retention,
            waiting.getOrDefault(rs.getString(2), Map.of()), rs.getLong(16)));
      }
    }
    return new Status(now, List.copyOf(queues), List.of(), nodes(c));
  }

  /** The cluster's nodes and the live leases each holds (leases only exist on cursors with work: cursors_ready). */
  private List<Status.NodeStatus> nodes(Connection c) throws SQLException {
    Map<String, Long> leases = new HashMap<>();
    try (PreparedStatement st = c.prepareStatement("select c.lease_owner, count(*) from " + s + ".cursors c"
        + " where c.has_pending and c.lease_id is not null and c.lease_expires_at > now() group by c.lease_owner");
        ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        leases.put(rs.getString(1), rs.getLong(2));
      }
    }
    List<Status.NodeStatus> out = new ArrayList<>();
    try (PreparedStatement st = c.prepareStatement("select n.node_id, n.started_at, n.heartbeat_at, n.dead_after > now(),"
        + " n.version from " + s + ".nodes n order by n.node_id");
        ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        boolean alive = rs.getBoolean(4);
        out.add(new Status.NodeStatus(rs.getString(1), rs.getTimestamp(2).toInstant(), rs.getTimestamp(3).toInstant(),
            alive, rs.getString(5), alive ? leases.getOrDefault(rs.getString(1), 0L) : 0));
      }
    }
    return out;
  }

  /** One page of a queue's partitions with their cursors (see {@link io.queen.QueueClient#partitions}). */
  public List<Status.PartitionStatus> partitions(String queue, String after, int limit) {
    return Sql.inTransaction(ds, "partitions", c -> {
      Sql.indexPlansOnly(c);
      List<Status.PartitionStatus> out = new ArrayList<>();
      try (PreparedStatement st = c.prepareStatement("""
          with ps as (
            select p.id, p.name, p.first_offset, p.next_offset, p.last_message_at
            from %1$s.partitions p join %1$s.queues q on q.id = p.queue_id
            where q.name = ? and (?::text is null or p.name > ?::text)
            order by p.name limit ?)
          select ps.id, ps.name, ps.first_offset, ps.next_offset, ps.last_message_at, c.group_name, c.committed_offset,
            greatest(ps.next_offset - 1 - greatest(c.committed_offset, ps.first_offset - 1), 0),
            case when c.lease_id is not null and c.lease_expires_at > now() then c.lease_owner end,
            case when c.lease_id is not null and c.lease_expires_at > now() then c.lease_expires_at end, c.attempts
          from ps left join %1$s.cursors c on c.partition_id = ps.id
          order by ps.name, c.group_name
          """.formatted(s))) {
        st.setString(1, queue);
        st.setString(2, after);
        st.setString(3, after);
        st.setInt(4, limit);
        try (ResultSet rs = st.executeQuery()) {
          long current = -1;
          String name = null;
          long first = 0;
          long next = 0;
          Instant last = null;
          List<Status.CursorStatus> cursors = new ArrayList<>();
          while (rs.next()) {
            if (rs.getLong(1) != current) {
              if (current != -1) {
                out.add(new Status.PartitionStatus(name, current, first, next, last, cursors));
              }
              current = rs.getLong(1);
              name = rs.getString(2);
              first = rs.getLong(3);
              next = rs.getLong(4);
              Timestamp t = rs.getTimestamp(5);
              last = t == null ? null : t.toInstant();
              cursors = new ArrayList<>();
            }
            if (rs.getString(6) != null) {
              Timestamp exp = rs.getTimestamp(10);
              cursors.add(new Status.CursorStatus(rs.getString(6), rs.getLong(7), rs.getLong(8), rs.getString(9),
                  exp == null ? null : exp.toInstant(), rs.getInt(11)));
            }
          }
          if (current != -1) {
            out.add(new Status.PartitionStatus(name, current, first, next, last, cursors));
          }
        }
      }
      return out;
    });
  }
}
