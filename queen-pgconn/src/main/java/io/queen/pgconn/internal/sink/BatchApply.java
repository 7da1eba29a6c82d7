package io.queen.pgconn.internal.sink;

import io.queen.Message;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.pgconn.internal.spec.SinkSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One batch applied in one target transaction, exactly once through the progress rows: the fast path (the whole
 * batch one statement that also moves the progress rows), the general way (progress rows locked in partition-id
 * order, what is at or below them dropped, runs of one statement), and message by message under savepoints where
 * PostgreSQL refused a row: a refused message is tried exactly {@code maxAttempts} times, then dead-lettered. A try is
 * a statement that ran it and was refused; a statement shared with other messages counts as a try of the first of them
 * refused on its own, and the tries are kept on the partition's progress row in the same transaction. Safe for the
 * sink's worker threads, each with its own connection.
 */
final class BatchApply {
  /** Logs under Sink's logger, the one an operator knows and configures for all of it. */
  private static final Logger LOG = LoggerFactory.getLogger(Sink.class);
  /**
   * A statement over a run of messages ({@code of}, in the statement's order) that PostgreSQL refused with a data
   * error, and {@code message}, the run's only message when it held one: that refusal is the message's try in this
   * delivery, and it is not run again on its own. Over several messages it is null: PostgreSQL's error does not say
   * which row it refused (nor, inside a transaction, does pgjdbc say which entry of a JDBC batch: it reports every
   * entry failed), so each message then runs on its own to find it, the refused one included; the first of {@code of}
   * refused on its own is the row the statement stopped at, and that statement's refusal counts as one of its tries.
   */
  static final class Refused extends Exception {
    private static final long serialVersionUID = 1L;
    final transient SQLException error;
    final transient Message message;
    final transient List<Message> of;

    Refused(SQLException error, List<Message> of) {
      super(null, null, false, false);
      this.error = error;
      this.of = List.copyOf(of);
      this.message = of.size() == 1 ? of.get(0) : null;
    }
  }

  /**
   * What one batch did in its target transaction, not committed yet: messages to complete, to dead-letter (with the
   * error), to fail (a refused head with attempts left, with the error: one durable attempt), held back after a
   * failed one, and how many of the completed were at or below their progress row (skipped) or passed over.
   */
  record Outcome(List<Message> done, Map<Message, String> dead, Map<Message, String> failed, List<Message> held,
      int skipped, int ignored) {}

  private final ConnectorHost host;
  private final SinkSpec spec;
  private final TargetConnections connections;
  private final SinkTables tables;
  private final RowStatements rows;
  private volatile boolean anyDeferrable;

  BatchApply(ConnectorHost host, SinkSpec spec, TargetConnections connections, SinkTables tables, RowStatements rows) {
    this.host = host;
    this.spec = spec;
    this.connections = connections;
    this.tables = tables;
    this.rows = rows;
  }

  /** A sql-mode sink: whether the target database has a deferrable constraint (read at start). */
  void anyDeferrable(boolean any) {
    anyDeferrable = any;
  }

  /**
   * At the start of each of a batch's transactions: a deferred check would fail the COMMIT, past the savepoints that
   * isolate a refused row, and a failed commit reads as transient, so the batch would be retried for good instead of
   * its bad row dead-lettered. Where a deferrable constraint may fire, checks happen at once.
   */
  private void checkConstraintsAtOnce(Connection c) throws SQLException {
    TargetTable table = rows.table();
    if (table != null ? table.deferrable() : anyDeferrable) {
      try (Statement st = c.createStatement()) {
        st.execute("set constraints all immediate");
      }
    }
  }

  /**
   * Applies one batch in the target transaction of {@code c} and says what it did; the caller commits. The fast path
   * first (one statement for the whole batch), else the progress rows locked, what is done dropped, the rest applied
   * in runs, and message by message (each under a savepoint) where a run was refused.
   */
  Outcome apply(Connection c, List<Message> batch) throws SQLException {
    checkConstraintsAtOnce(c);
    TreeMap<Long, List<Message>> byPartition = new TreeMap<>();
    for (Message m : batch) {
      byPartition.computeIfAbsent(m.partitionId(), k -> new ArrayList<>()).add(m);
    }
    Refused refused = null;
    try {
      if (!lastTryFirst() && applyFollowing(c, batch, byPartition)) {
        return new Outcome(new ArrayList<>(batch), Map.of(), Map.of(), List.of(), 0, 0);
      }
    } catch (Refused r) {
      refused = r; // the batch's one statement was refused: message by message below, never that statement again
    }
    checkConstraintsAtOnce(c); // again: the attempt above may have rolled its transaction back
    SinkTables.Locked locked = tables.lock(c, byPartition);
    Map<Long, Long> last = locked.last();
    // at or below the progress row but dead-lettered, not applied: tried again (a redrive, or a batch that comes
    // again because Queen's record of the dead letter was lost)
    Map<Message, String> marked = tables.deadLettered(c, byPartition, last);
    List<Message> fresh = new ArrayList<>();
    for (Message m : batch) {
      if (m.offset() > last.get(m.partitionId())) {
        fresh.add(m);
      }
    }
    Map<Message, String> dead = new LinkedHashMap<>();
    Map<Message, String> failed = new LinkedHashMap<>();
    Map<Message, Integer> tries = new LinkedHashMap<>();
    List<Message> held = new ArrayList<>();
    Map<Long, Long> advance = new HashMap<>();
    // a message refused before (attempt > 1: for the sink's group only a FAILED ack counts; or tries counted on its
    // progress row) goes message by message at once rather than failing a statement shared with others again (that
    // would be a try it could not be charged with while PostgreSQL does not say which row it refused); so does a
    // dead-lettered one tried again, every message when each try is the last (maxAttempts 1), and a batch whose one
    // statement was just refused (run again, it would only run the refused row once more)
    boolean oneByOne = refused != null || !marked.isEmpty() || lastTryFirst();
    for (Message m : fresh) {
      advance.merge(m.partitionId(), m.offset(), Math::max);
      oneByOne |= m.attempt() > 1 || locked.tried(m) > 0;
    }
    boolean fast = !oneByOne;
    try {
      if (fast && runFast(c, fresh, advance)) {
        advance.clear(); // advanced by the last statement
      }
    } catch (Refused r) {
      refused = r;
      fast = false;
    } catch (RowStatements.DataError e) {
      fast = false;
    }
    List<Message> unmark = new ArrayList<>();
    Map<Message, String> mark = new LinkedHashMap<>();
    if (!fast) {
      advance.clear();
      if (!oneByOne) {
        c.rollback(); // the locks go too: take them again and apply message by message
        checkConstraintsAtOnce(c);
        locked = tables.lock(c, byPartition);
        last = locked.last();
        marked = tables.deadLettered(c, byPartition, last);
      }
      // the refused statement's try goes to the first of its messages refused on its own: the row it stopped at. So
      // the messages run here in the batch's order, the statements' (the core hands partitions over in turn, not
      // always in partition-id order)
      boolean statementCharged = refused == null || refused.message != null;
      Map<Long, List<Message>> inBatchOrder = new LinkedHashMap<>();
      for (Message m : batch) {
        inBatchOrder.putIfAbsent(m.partitionId(), byPartition.get(m.partitionId()));
      }
      for (List<Message> part : inBatchOrder.values()) {
        for (int i = 0; i < part.size(); i++) {
          Message m = part.get(i);
          boolean below = m.offset() <= last.get(m.partitionId());
          if (below && !marked.containsKey(m)) {
            continue;
          }
          if (below && i + 1 < part.size() && part.get(i + 1).offset() <= last.get(m.partitionId())) {
            // with messages after it that were applied: a batch that comes again because Queen's record of the dead
            // letter was lost, not a redrive (delivered alone); applied now, it would land after them
            dead.put(m, gaveUp(Math.max(m.attempt(), locked.counted(m))) + TargetErrors.masked(marked.get(m)));
            continue;
          }
          Exception e = null;
          int triesNow = 1;
          if (refused != null && refused.message == m && !below) {
            e = refused.error; // this delivery's try of it: its refusal by the statement that held it
          } else {
            Savepoint sp = c.setSavepoint();
            try {
              applyOne(c, m);
              c.releaseSavepoint(sp);
              if (below) {
                unmark.add(m); // applied at last: no longer a dead letter of this sink; the row stays where it is
              } else {
                advance.merge(m.partitionId(), m.offset(), Math::max);
              }
              continue;
            } catch (SQLException | RowStatements.DataError x) {
              if (x instanceof SQLException se && !TargetErrors.isDataError(host, se)) {
                throw se;
              }
              c.rollback(sp);
              e = x;
              if (!statementCharged && !below && refused.of.contains(m)) {
                statementCharged = true;
                triesNow = 2; // the shared statement stopped at it, then it ran on its own
              }
            }
          }
          // the durable count, shared by all nodes: the tries counted on its progress row, else the cursor's
          // attempts on this head (a FAILED ack each), plus this delivery's. A message at or below its row (a
          // redrive, or a dead letter whose record in Queen was lost) counts the cursor's attempts as a redrive does
          int n = below ? m.attempt() : Math.max(m.attempt() - 1, locked.tried(m)) + triesNow;
          String why = TargetErrors.errorText(host, e); // for Queen and the logs: the names of the objects, values masked
          if (n >= spec.maxAttempts()) {
            dead.put(m, gaveUp(n) + why);
            mark.put(m, TargetErrors.databaseError(e)); // in the target, beside the data: as PostgreSQL wrote it
            if (!below) {
              advance.merge(m.partitionId(), m.offset(), Math::max);
              tries.put(m, n); // for the record in Queen made again should Queen's be lost (above)
            }
            LOG.warn("{} - sink '{}': partition '{}' offset {} refused {} time(s), dead-lettered: {}", host.nodeId(),
                spec.name(), m.partition(), m.offset(), n, why);
          } else {
            LOG.warn("{} - sink '{}': partition '{}' offset {} refused (attempt {} of {}): {}", host.nodeId(),
                spec.name(), m.partition(), m.offset(), n, spec.maxAttempts(), why);
            failed.put(m, "sink '" + spec.name() + "' attempt " + n + " of " + spec.maxAttempts() + " refused: " + why);
            if (!below) {
              tries.put(m, n);
            }
            held.addAll(part.subList(i + 1, part.size()));
            break;
          }
        }
      }
    }
    List<Message> done = new ArrayList<>();
    int skippedHere = 0;
    int ignoredHere = 0;
    for (Message m : batch) {
      if (!dead.containsKey(m) && !failed.containsKey(m) && !held.contains(m)) {
        done.add(m);
        if (m.offset() <= last.get(m.partitionId()) && !marked.containsKey(m)) {
          skippedHere++;
        } else if (rows.passedOver(m)) {
          ignoredHere++;
        }
      }
    }
    if (!advance.isEmpty()) {
      tables.advance(c, advance);
    }
    tables.recordDeadLetters(c, mark, unmark);
    tables.recordTries(c, tries);
    return new Outcome(done, dead, failed, held, skippedHere, ignoredHere);
  }

  /**
   * Whether a message's first try may already be its last (maxAttempts 1): it then never shares a statement with
   * other messages, since a refusal there would leave no try to find which row PostgreSQL refused.
   */
  private boolean lastTryFirst() {
    return spec.maxAttempts() == 1;
  }

  /** How the reason of the sink's {@code DEAD_LETTER} ack in Queen begins. */
  private String gaveUp(int attempts) {
    return "sink '" + spec.name() + "' gave up after " + attempts + " attempt(s): ";
  }

  /**
   * The common batch in one statement: every message a first delivery and read by one row statement. The
   * statement moves each partition's progress row to the batch's last offset of that partition only where the
   * row is below the batch's first offset of that partition (nothing of the batch was applied before), creates
   * the rows of partitions seen for the first time, and writes the rows only when every partition's row moved
   * or was created; it answers how many did. A row another node moved meanwhile is re-read by PostgreSQL after
   * that node's commit and no longer qualifies; a row created meanwhile is left alone. When not every partition
   * qualified (a batch applied before whose ack never reached Queen, a race), the statement wrote nothing that
   * stays: the transaction is rolled back here and the batch goes the general way (lock the progress rows, drop
   * what is done, apply). Returns whether the batch was applied (not committed yet).
   *
   * @throws Refused when PostgreSQL refused a row (rolled back here): the general way applies the batch message by
   *     message, without this statement
   */
  private boolean applyFollowing(Connection c, List<Message> batch, Map<Long, List<Message>> byPartition)
      throws SQLException, Refused {
    if (batch.stream().anyMatch(m -> m.attempt() > 1)) {
      return false;
    }
    List<RowStatements.Bound> run = new ArrayList<>(batch.size());
    try {
      for (Message m : batch) {
        RowStatements.Bound b = rows.bind(m);
        if (b == null || b.setSql() == null || (!run.isEmpty() && !run.get(0).sql().equals(b.sql()))) {
          return false;
        }
        run.add(b);
      }
    } catch (RowStatements.DataError e) {
      return false; // found again on the general way, message by message
    }
    int k = byPartition.size();
    Long[] pids = new Long[k];
    String[] names = new String[k];
    Long[] first = new Long[k];
    Long[] last = new Long[k];
    int i = 0;
    for (var e : byPartition.entrySet()) {
      List<Message> part = e.getValue();
      pids[i] = e.getKey();
      names[i] = part.get(0).partition();
      first[i] = part.get(0).offset();
      last[i] = part.get(part.size() - 1).offset();
      i++;
    }
    RowStatements.Rows batchRows = RowStatements.rows(run);
    PreparedStatement st = connections.prepared(c, "with v as (select * from unnest(?::bigint[], ?::text[], ?::bigint[],"
        + " ?::bigint[]) v(pid, name, first, o)), advance as (update " + SinkTables.PROGRESS + " p set last_offset = v.o,"
        + " updated_at = now() from v where p.sink = ? and p.partition_id = v.pid and p.last_offset < v.first"
        + " and (p.tried_offset is null or p.tried_offset <= p.last_offset or p.tries = 0) returning 1),"
        + " created as (insert into " + SinkTables.PROGRESS + " (sink, partition_id, partition, last_offset)"
        + " select ?, v.pid, v.name, v.o from v where not exists (select 1 from " + SinkTables.PROGRESS + " p where p.sink = ?"
        + " and p.partition_id = v.pid) order by v.pid on conflict (sink, partition_id) do nothing returning 1),"
        + " moved as (select (select count(*) from advance) + (select count(*) from created) as n), applied as ("
        + batchRows.sql().replace(RowStatements.ROWS_PARAM, "(select case when moved.n = ? then ?::jsonb else '[]'::jsonb end from moved)")
        + " returning 1) select moved.n, (select count(*) from applied), set_config("
        + "'idle_in_transaction_session_timeout', " + SinkTables.IDLE_IN_TRANSACTION + ", true) from moved"); // as SinkTables.lock bounds it
    st.setArray(1, c.createArrayOf("bigint", pids));
    st.setArray(2, c.createArrayOf("text", names));
    st.setArray(3, c.createArrayOf("bigint", first));
    st.setArray(4, c.createArrayOf("bigint", last));
    st.setString(5, spec.name());
    st.setString(6, spec.name());
    st.setString(7, spec.name());
    st.setInt(8, k);
    st.setObject(9, batchRows.json(), Types.OTHER);
    int moved;
    try (ResultSet rs = st.executeQuery()) {
      rs.next();
      moved = rs.getInt(1);
    } catch (SQLException e) {
      // 21000 (a data error too): rows of one statement met on one key of a unique index the reduction did not see
      // as one key (NULLS NOT DISTINCT); one message at a time cannot meet that
      if (!TargetErrors.isDataError(host, e)) {
        throw e;
      }
      c.rollback();
      throw new Refused(e, batch); // the general way finds it, message by message
    }
    if (moved != k) {
      c.rollback();
      return false;
    }
    return true;
  }

  /**
   * Applies in order. Consecutive messages with the same statement go together: a row statement (append,
   * upsert, cdc's inserts and updates) as ONE statement over a JSON array of the rows, reduced to the last
   * row per key for an upsert (what applying them one after the other leaves); any other as one JDBC batch.
   * When the last run is a row statement it also moves the progress rows to {@code advance} (one statement,
   * one round trip less): returns whether it did.
   */
  private boolean runFast(Connection c, List<Message> fresh, Map<Long, Long> advance)
      throws SQLException, RowStatements.DataError, Refused {
    List<RowStatements.Bound> run = new ArrayList<>();
    List<Message> of = new ArrayList<>();
    for (Message m : fresh) {
      RowStatements.Bound b = rows.bind(m);
      if (b == null) {
        continue; // nothing to do for this message (a skipped truncate)
      }
      if (!run.isEmpty() && !run.get(0).sql().equals(b.sql())) {
        flush(c, run, of, null);
      }
      run.add(b);
      of.add(m);
    }
    return flush(c, run, of, advance);
  }

  /**
   * Runs a run of messages with the same statement ({@code of}: their messages), and empties both; a row statement
   * also advances the progress rows when {@code advance} is given (returns whether it did).
   *
   * @throws Refused when PostgreSQL refused a row, naming its message when the run says which (see {@link Refused})
   */
  private boolean flush(Connection c, List<RowStatements.Bound> run, List<Message> of, Map<Long, Long> advance)
      throws SQLException, Refused {
    if (run.isEmpty()) {
      return false;
    }
    RowStatements.Bound first = run.get(0);
    boolean advanced = false;
    try {
      if (first.setSql() != null) {
        RowStatements.Rows batchRows = RowStatements.rows(run);
        advanced = advance != null && !advance.isEmpty();
        PreparedStatement st = connections.prepared(c, advanced
            ? "with advance as (" + SinkTables.ADVANCE + ") " + batchRows.sql() : batchRows.sql());
        if (advanced) {
          tables.bindAdvance(c, st, advance);
        }
        st.setObject(advanced ? 4 : 1, batchRows.json(), Types.OTHER);
        st.executeUpdate();
      } else {
        PreparedStatement st = connections.prepared(c, first.sql());
        for (RowStatements.Bound b : run) {
          b.set(st);
          st.addBatch();
        }
        st.executeBatch();
      }
    } catch (SQLException e) {
      if (!TargetErrors.isDataError(host, e)) {
        throw e;
      }
      throw new Refused(e, of);
    }
    run.clear();
    of.clear();
    return advanced;
  }

  private void applyOne(Connection c, Message m) throws SQLException, RowStatements.DataError {
    RowStatements.Bound b = rows.bind(m);
    if (b == null) {
      return;
    }
    PreparedStatement st = connections.prepared(c, b.sql());
    b.set(st);
    st.execute();
  }
}
