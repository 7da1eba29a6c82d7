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
 * queen.sink_progress} (each partition's last applied offset, locked in partition-id order, moved forward, and the
 * tries of the partition's refused head, {@code tries} of the message at {@code tried_offset}) and
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
        tried_offset bigint,
        tries        int         not null default 0,
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
   * The batch's progress rows, locked: each partition's last applied offset, and the tries the target counted for a
   * refused message after it ({@link #tried}).
   */
  record Locked(Map<Long, Long> last, Map<Long, long[]> refusals) {
    /**
     * How many times the target committed a refusal of {@code m} (0 when none): counted only for a message after its
     * partition's last applied offset, the partition's head that was refused and not yet applied or dead-lettered.
     */
    int tried(Message m) {
      return m.offset() > last.get(m.partitionId()) ? counted(m) : 0;
    }

    /**
     * The tries last counted for {@code m} on its progress row, also once the row moved past it: those of a dead
     * letter, when its partition has had no refusal since (0 when none).
     */
    int counted(Message m) {
      long[] r = refusals.get(m.partitionId());
      return r != null && r[0] == m.offset() ? (int) r[1] : 0;
    }
  }

  /**
   * Locks the batch's progress rows in partition-id order and returns them. The rows exist after a partition's first
   * batch, so that is one statement; the missing ones are created (at -1) and locked after, in partition-id order
   * too. Two transactions creating rows for the same new partitions at once may deadlock: a transient failure,
   * retried like any.
   */
  Locked lock(Connection c, TreeMap<Long, List<Message>> byPartition) throws SQLException {
    Locked locked = new Locked(new HashMap<>(), new HashMap<>());
    selectForUpdate(c, byPartition.keySet().toArray(), locked);
    if (locked.last().size() == byPartition.size()) {
      return locked;
    }
    List<Object> pids = new ArrayList<>();
    List<Object> names = new ArrayList<>();
    for (var e : byPartition.entrySet()) {
      if (!locked.last().containsKey(e.getKey())) {
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
    selectForUpdate(c, pids.toArray(), locked);
    return locked;
  }

  /**
   * Locks the batch's progress rows, and bounds how long this transaction may then sit idle: a worker whose process
   * is paused (a long GC, a frozen VM) mid-batch would otherwise hold these row locks until it goes on, and every
   * node that took its partitions over would wait on them, without bound. PostgreSQL ends such a session after
   * 15 s ({@link #IDLE_IN_TRANSACTION}); its transaction rolls back and the new holder goes on. A working worker's statements
   * follow each other within milliseconds. {@code set_config(..., true)} lasts the transaction only, so a pooled
   * connection goes back as it came.
   */
  private void selectForUpdate(Connection c, Object[] pids, Locked into) throws SQLException {
    PreparedStatement sel = connections.prepared(c, "select partition_id, last_offset, tried_offset, tries, set_config("
        + "'idle_in_transaction_session_timeout', " + IDLE_IN_TRANSACTION + ", true) from " + PROGRESS
        + " where sink = ? and partition_id = any(?::bigint[]) order by partition_id for update");
    sel.setString(1, sink);
    sel.setArray(2, c.createArrayOf("bigint", pids));
    try (ResultSet rs = sel.executeQuery()) {
      while (rs.next()) {
        into.last().put(rs.getLong(1), rs.getLong(2));
        long tried = rs.getLong(3);
        if (!rs.wasNull() && rs.getInt(4) > 0) {
          into.refusals().put(rs.getLong(1), new long[] {tried, rs.getInt(4)});
        }
      }
    }
  }

  /**
   * In the batch's target transaction, after its advance: the tries of each refused message of {@code tries}, kept
   * on its partition's progress row, so the next delivery (on any node, even one whose acknowledgement in Queen was
   * lost) goes on counting from there. Only the head of a partition can be refused with tries left; once the row
   * moves past it (applied, or dead-lettered: its count stays for the record of that) the count no longer adds to its
   * tries ({@link Locked#tried}).
   */
  void recordTries(Connection c, Map<Message, Integer> tries) throws SQLException {
    if (tries.isEmpty()) {
      return;
    }
    List<Object> pids = new ArrayList<>();
    List<Object> offsets = new ArrayList<>();
    List<Object> counts = new ArrayList<>();
    for (var e : tries.entrySet()) {
      pids.add(e.getKey().partitionId());
      offsets.add(e.getKey().offset());
      counts.add(e.getValue());
    }
    PreparedStatement st = connections.prepared(c, "update " + PROGRESS + " p set tried_offset = v.o, tries = v.n"
        + " from unnest(?::bigint[], ?::bigint[], ?::int[]) v(pid, o, n) where p.sink = ? and p.partition_id = v.pid");
    st.setArray(1, c.createArrayOf("bigint", pids.toArray()));
    st.setArray(2, c.createArrayOf("bigint", offsets.toArray()));
    st.setArray(3, c.createArrayOf("int", counts.toArray()));
    st.setString(4, sink);
    st.executeUpdate();
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
