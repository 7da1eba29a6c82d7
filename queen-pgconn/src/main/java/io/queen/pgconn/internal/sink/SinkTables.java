package io.queen.pgconn.internal.sink;

import io.queen.Message;
import io.queen.pgconn.internal.spec.Ident;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The sink's own two tables in the target, as one sink uses them in a batch's transaction: {@code
 * queen.sink_progress} (each partition's last applied offset, locked in partition-id order, moved forward) and
 * {@code queen.sink_dead_letters} (what the sink dead-lettered at or below its progress row). Creates them when
 * missing. Not thread-safe per connection: each worker uses its own connection.
 */
final class SinkTables {
  static final String PROGRESS = Ident.quote("queen") + "." + Ident.quote("sink_progress");
  static final String PROGRESS_DDL = """
      create table if not exists queen.sink_progress (
        sink         text        not null,
        partition_id bigint      not null,
        partition    text        not null,
        last_offset  bigint      not null,
        updated_at   timestamptz not null default now(),
        primary key (sink, partition_id))""";
  static final String DEAD = Ident.quote("queen") + "." + Ident.quote("sink_dead_letters");
  /**
   * A dead letter the sink decided in a target transaction (the progress row moved past it there), kept until the
   * message is applied: a batch that comes again because Queen's record of it was lost (a failed ack, a lost lease,
   * a crash) finds it here and dead-letters it again instead of taking it for applied, and a redrive of it is tried.
   * {@code error} is the database's message as PostgreSQL wrote it (values unmasked: it sits beside the data).
   */
  static final String DEAD_DDL = """
      create table if not exists queen.sink_dead_letters (
        sink         text        not null,
        partition_id bigint      not null,
        "offset"     bigint      not null,
        error        text        not null,
        created_at   timestamptz not null default now(),
        primary key (sink, partition_id, "offset"))""";
  /**
   * The value for {@code idle_in_transaction_session_timeout} in a batch's target transaction (see selectForUpdate):
   * 15 s, or the session's own when that is stricter.
   */
  static final String IDLE_IN_TRANSACTION = "(select case when setting::int between 1 and 14999 then setting"
      + " else '15000' end from pg_settings where name = 'idle_in_transaction_session_timeout')";
  /** Moves the offsets of the batch's partitions: (partition ids, last offsets, sink). */
  static final String ADVANCE = "update " + PROGRESS + " p set last_offset = v.o, updated_at = now()"
      + " from unnest(?::bigint[], ?::bigint[]) v(pid, o) where p.sink = ? and p.partition_id = v.pid";

  private final String sink;
  private final TargetConnections connections;

  SinkTables(String sink, TargetConnections connections) {
    this.sink = sink;
    this.connections = connections;
  }

  /**
   * Creates the sink's two tables in the target when missing; pre-created ones are used as they are (CREATE
   * SCHEMA and CREATE TABLE check their privilege even with IF NOT EXISTS, so only what is missing is created).
   */
  static void ensure(Connection c) throws SQLException {
    if (missing(c, "select to_regclass('queen.sink_progress') is null or to_regclass('queen.sink_dead_letters') is null")) {
      try (Statement st = c.createStatement()) {
        st.execute("select pg_advisory_xact_lock(" + 0x5155_4545_4e00_0009L + ")");
        if (missing(c, "select to_regnamespace('queen') is null")) {
          st.execute("create schema if not exists queen");
        }
        if (missing(c, "select to_regclass('queen.sink_progress') is null")) {
          st.execute(PROGRESS_DDL);
        }
        if (missing(c, "select to_regclass('queen.sink_dead_letters') is null")) {
          st.execute(DEAD_DDL);
        }
      }
    }
  }

  private static boolean missing(Connection c, String query) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      rs.next();
      return rs.getBoolean(1);
    }
  }

  /**
   * Locks the batch's progress rows in partition-id order and returns their last offsets. The rows exist
   * after a partition's first batch, so that is one statement; the missing ones are created (at -1) and
   * locked after, in partition-id order too. Two transactions creating rows for the same new partitions at
   * once may deadlock: a transient failure, retried like any.
   */
  Map<Long, Long> lock(Connection c, TreeMap<Long, List<Message>> byPartition) throws SQLException {
    Map<Long, Long> last = selectForUpdate(c, byPartition.keySet().toArray());
    if (last.size() == byPartition.size()) {
      return last;
    }
    List<Object> pids = new ArrayList<>();
    List<Object> names = new ArrayList<>();
    for (var e : byPartition.entrySet()) {
      if (!last.containsKey(e.getKey())) {
        pids.add(e.getKey());
        names.add(e.getValue().get(0).partition());
      }
    }
    PreparedStatement ins = connections.prepared(c, "insert into " + PROGRESS + " (sink, partition_id, partition, last_offset)"
        + " select ?, v.pid, v.p, -1 from unnest(?::bigint[], ?::text[]) v(pid, p) order by v.pid"
        + " on conflict (sink, partition_id) do nothing");
    ins.setString(1, sink);
    ins.setArray(2, c.createArrayOf("bigint", pids.toArray()));
    ins.setArray(3, c.createArrayOf("text", names.toArray()));
    ins.executeUpdate();
    last.putAll(selectForUpdate(c, pids.toArray()));
    return last;
  }

  /**
   * Locks the batch's progress rows, and bounds how long this transaction may then sit idle: a worker whose process
   * is paused (a long GC, a frozen VM) mid-batch would otherwise hold these row locks until it goes on, and every
   * node that took its partitions over would wait on them, without bound. PostgreSQL ends such a session after
   * 15 s ({@link #IDLE_IN_TRANSACTION}); its transaction rolls back and the new holder goes on. A working worker's statements
   * follow each other within milliseconds. {@code set_config(..., true)} lasts the transaction only, so a pooled
   * connection goes back as it came.
   */
  private Map<Long, Long> selectForUpdate(Connection c, Object[] pids) throws SQLException {
    PreparedStatement sel = connections.prepared(c, "select partition_id, last_offset, set_config("
        + "'idle_in_transaction_session_timeout', " + IDLE_IN_TRANSACTION + ", true) from " + PROGRESS
        + " where sink = ? and partition_id = any(?::bigint[]) order by partition_id for update");
    sel.setString(1, sink);
    sel.setArray(2, c.createArrayOf("bigint", pids));
    Map<Long, Long> last = new HashMap<>();
    try (ResultSet rs = sel.executeQuery()) {
      while (rs.next()) {
        last.put(rs.getLong(1), rs.getLong(2));
      }
    }
    return last;
  }

  /** Moves the progress rows of {@code advance} (partition id to last offset) in the batch's transaction. */
  void advance(Connection c, Map<Long, Long> advance) throws SQLException {
    // cached per connection like every statement here: never closed by this code (a worker's own connection
    // serves batch after batch; closing it here broke every next batch on that connection once)
    PreparedStatement st = connections.prepared(c, ADVANCE);
    bindAdvance(c, st, advance);
    st.executeUpdate();
  }

  void bindAdvance(Connection c, PreparedStatement st, Map<Long, Long> advance) throws SQLException {
    st.setArray(1, c.createArrayOf("bigint", advance.keySet().toArray()));
    st.setArray(2, c.createArrayOf("bigint", advance.values().toArray()));
    st.setString(3, sink);
  }

  /**
   * The batch's messages at or below their partition's progress row that this sink dead-lettered rather than
   * applied ({@code queen.sink_dead_letters}); looked up only when the batch has any message at or below its row.
   */
  Map<Message, String> deadLettered(Connection c, Map<Long, List<Message>> byPartition, Map<Long, Long> last)
      throws SQLException {
    List<Object> pids = new ArrayList<>();
    List<Object> offsets = new ArrayList<>();
    for (var e : byPartition.entrySet()) {
      for (Message m : e.getValue()) {
        if (m.offset() <= last.get(e.getKey())) {
          pids.add(m.partitionId());
          offsets.add(m.offset());
        }
      }
    }
    if (pids.isEmpty()) {
      return Map.of();
    }
    PreparedStatement st = connections.prepared(c, "select d.partition_id, d.\"offset\", d.error from " + DEAD + " d"
        + " join unnest(?::bigint[], ?::bigint[]) v(pid, o) on d.partition_id = v.pid and d.\"offset\" = v.o"
        + " where d.sink = ?");
    st.setArray(1, c.createArrayOf("bigint", pids.toArray()));
    st.setArray(2, c.createArrayOf("bigint", offsets.toArray()));
    st.setString(3, sink);
    Map<String, String> found = new HashMap<>();
    try (ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        found.put(rs.getLong(1) + "/" + rs.getLong(2), rs.getString(3));
      }
    }
    Map<Message, String> out = new HashMap<>();
    if (found.isEmpty()) {
      return out;
    }
    for (List<Message> part : byPartition.values()) {
      for (Message m : part) {
        String error = found.get(m.partitionId() + "/" + m.offset());
        if (error != null) {
          out.put(m, error);
        }
      }
    }
    return out;
  }

  /** In the batch's target transaction: what it dead-lettered is recorded, what it applied at last is not any more. */
  void recordDeadLetters(Connection c, Map<Message, String> mark, List<Message> unmark) throws SQLException {
    if (!mark.isEmpty()) {
      List<Object> pids = new ArrayList<>();
      List<Object> offsets = new ArrayList<>();
      List<Object> errors = new ArrayList<>();
      for (var e : mark.entrySet()) {
        pids.add(e.getKey().partitionId());
        offsets.add(e.getKey().offset());
        errors.add(e.getValue());
      }
      PreparedStatement st = connections.prepared(c, "insert into " + DEAD + " (sink, partition_id, \"offset\", error)"
          + " select ?, v.pid, v.o, v.e from unnest(?::bigint[], ?::bigint[], ?::text[]) v(pid, o, e)"
          + " on conflict (sink, partition_id, \"offset\") do update set error = excluded.error, created_at = now()");
      st.setString(1, sink);
      st.setArray(2, c.createArrayOf("bigint", pids.toArray()));
      st.setArray(3, c.createArrayOf("bigint", offsets.toArray()));
      st.setArray(4, c.createArrayOf("text", errors.toArray()));
      st.executeUpdate();
    }
    if (!unmark.isEmpty()) {
      List<Object> pids = new ArrayList<>();
      List<Object> offsets = new ArrayList<>();
      for (Message m : unmark) {
        pids.add(m.partitionId());
        offsets.add(m.offset());
      }
      PreparedStatement st = connections.prepared(c, "delete from " + DEAD + " d using unnest(?::bigint[], ?::bigint[]) v(pid, o)"
          + " where d.sink = ? and d.partition_id = v.pid and d.\"offset\" = v.o");
      st.setArray(1, c.createArrayOf("bigint", pids.toArray()));
      st.setArray(2, c.createArrayOf("bigint", offsets.toArray()));
      st.setString(3, sink);
      st.executeUpdate();
    }
  }
}
