package io.queen.embedded.internal.ops;

import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Metrics;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Every {@link #PERIOD_MS} on every node: finds the oldest open transaction (or snapshot) holding the database's xmin
 * horizon back, sets the gauge {@code queen.database.horizon.age} to how long it has held it, and past the node's
 * {@code horizonWarnAfter} logs one WARN naming it, then one INFO when it ends.
 *
 * <p>Why Queen watches it: while a transaction is open, PostgreSQL removes no dead row version written after it began.
 * Queen's partition and cursor rows are updated on every push, pop and ack, so each of those calls walks more dead
 * versions as the transaction ages. The usual holders are a
 * forgotten {@code BEGIN} (idle in transaction), a long report or {@code pg_dump}, and prepared transactions; an
 * operator who is told which session it is can end it.
 *
 * <p>What it sees: {@code pg_stat_activity} (a session with a transaction id, or a snapshot, and an open transaction)
 * and {@code pg_prepared_xacts}, of Queen's database only (a transaction in another database does not hold back the
 * removal of this one's rows), client sessions only (autovacuum's snapshot does not count, and a parallel worker is its
 * leader's). How long a session has held the horizon is taken from its transaction's start: exact for a transaction
 * with an id and for a repeatable-read one ({@code pg_dump}, a report), an upper bound for a read-committed transaction
 * that only reads, whose statements each take a fresh snapshot (such a session is listed only while a statement runs).
 * A role without {@code pg_read_all_stats} sees only its own role's sessions.
 *
 * <p>A standby with {@code hot_standby_feedback} holds the horizon too, for as long as a query or transaction on it
 * runs: through its physical slot's {@code xmin}, or its walsender's {@code backend_xmin} when it has no slot
 * ({@code pg_stat_replication}). PostgreSQL keeps no time for those, so such a holder is timed from when this node
 * first saw that xmin there and transactions newer than it were started (an idle database, where nothing newer
 * exists, holds nothing back): a lower bound, which starts again at a node's start. Runs on the node's janitor
 * thread; {@link #run()} never throws.
 */
public final class HorizonWatch implements Runnable {
  private static final Logger LOG = LoggerFactory.getLogger(HorizonWatch.class);
  /** How often the horizon is checked. */
  public static final long PERIOD_MS = 10_000;

  static final String SQL = "select pid, coalesce(application_name, '')::text, coalesce(usename::text, ''),"
      + " coalesce(state, '')::text, extract(epoch from now() - xact_start)::float8 as held,"
      + " pid::text || '@' || xact_start::text"
      + " from pg_stat_activity"
      + " where (backend_xid is not null or backend_xmin is not null) and xact_start is not null"
      + "   and backend_type = 'client backend' and pid <> pg_backend_pid() and datname = current_database()"
      + " union all"
      + " select null, gid, owner::text, 'prepared', extract(epoch from now() - prepared)::float8, 'prepared:' || gid"
      + " from pg_prepared_xacts where database = current_database()"
      + " order by held desc nulls last limit 1";

  /**
   * Standbys' feedback: a physical slot's {@code xmin}, or a walsender's without a slot; with how many transaction ids
   * were started since it ({@code age}), to tell a holder from an idle database.
   */
  static final String STANDBYS_SQL = "select 'physical slot ''' || slot_name || '''', xmin::text, age(xmin)"
      + " from pg_replication_slots where slot_type = 'physical' and xmin is not null"
      + " union all"
      + " select 'standby ''' || coalesce(nullif(r.application_name, ''), host(r.client_addr), r.pid::text)"
      + "   || ''' (no slot)', r.backend_xmin::text, age(r.backend_xmin)"
      + " from pg_stat_replication r where r.backend_xmin is not null"
      + "   and not exists (select 1 from pg_replication_slots s where s.active_pid = r.pid)"
      + "   and exists (select 1 from pg_stat_activity a where a.pid = r.pid and a.datid is null)"; // physical

  private final String node;
  private final DataSource ds;
  private final Metrics metrics;
  private final Duration warnAfter;
  /** The holder warned about (its key: pid and transaction start, or the prepared transaction's gid), or null. */
  private String warned;
  private String warnedWho;
  private double warnedHeld;
  private boolean failing;
  /** Standbys' feedback seen at the last check, by standby and xmin: {first seen (nanoTime), age then}. */
  private Map<String, long[]> standbys = new HashMap<>();

  public HorizonWatch(String node, DataSource ds, Metrics metrics, Duration warnAfter) {
    this.node = node;
    this.ds = ds;
    this.metrics = metrics;
    this.warnAfter = warnAfter;
  }

  /**
   * The oldest holder: which transaction it is ({@code key}), who it is (never the statement text) and for how many
   * seconds it has held the horizon.
   */
  record Holder(String key, String who, double heldSeconds) {}

  @Override
  public void run() {
    try {
      Holder h = Sql.autoCommit(ds, "xmin horizon", c -> {
        try (PreparedStatement st = c.prepareStatement(SQL); ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            return null;
          }
          int pid = rs.getInt(1);
          boolean prepared = rs.wasNull();
          String who = prepared
              ? "prepared transaction '" + rs.getString(2) + "' of user '" + rs.getString(3) + "'"
              : "pid " + pid + ", application '" + rs.getString(2) + "', user '" + rs.getString(3) + "', state '"
                  + rs.getString(4) + "'";
          return new Holder(rs.getString(6), who, Math.max(0, rs.getDouble(5)));
        }
      });
      Holder standby = Sql.autoCommit(ds, "xmin horizon", this::oldestStandby);
      if (standby != null && (h == null || standby.heldSeconds() > h.heldSeconds())) {
        h = standby;
      }
      observe(h);
      if (failing) {
        failing = false;
        LOG.info("{} - the xmin horizon is read again", node);
      }
    } catch (RuntimeException e) {
      if (!failing) {
        failing = true;
        LOG.warn("{} - could not read the xmin horizon ({}); trying again every {} ms", node, Sql.describe(e),
            PERIOD_MS);
      }
    }
  }

  /** The standby whose feedback has held the horizon longest, as far as this node saw it, or null. */
  private Holder oldestStandby(Connection c) throws SQLException {
    long now = System.nanoTime();
    Map<String, long[]> seen = new HashMap<>();
    Holder oldest = null;
    try (PreparedStatement st = c.prepareStatement(STANDBYS_SQL); ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        String who = rs.getString(1);
        String key = "standby:" + who + "@" + rs.getString(2);
        long age = rs.getLong(3);
        long[] first = standbys.getOrDefault(key, new long[] {now, age});
        if (age <= first[1]) {
          first = new long[] {now, age}; // nothing newer started yet: it holds nothing back, the clock starts later
        }
        seen.put(key, first);
        if (age > first[1]) { // transactions newer than its xmin started since: it holds them back
          double held = (now - first[0]) / 1e9;
          if (oldest == null || held > oldest.heldSeconds()) {
            oldest = new Holder(key, "the hot_standby_feedback of " + who + " (a query or transaction on that standby,"
                + " timed from when this node first saw it; end it there)", held);
          }
        }
      }
    }
    standbys = seen;
    return oldest;
  }

  /** Sets the gauge and logs the crossings for what one check found ({@code null}: nothing holds the horizon). */
  void observe(Holder h) {
    metrics.horizonAge(h == null ? 0 : h.heldSeconds());
    if (warnAfter.isZero()) {
      return;
    }
    boolean over = h != null && h.heldSeconds() * 1000 >= warnAfter.toMillis();
    if (warned != null && (!over || !warned.equals(h.key()))) {
      LOG.info("{} - the transaction that held the xmin horizon ({}) no longer does, after about {} s", node, warnedWho,
          Math.round(warnedHeld));
      warned = null;
    }
    if (over && warned == null) {
      warned = h.key();
      warnedWho = h.who();
      LOG.warn("{} - a transaction has held the database's xmin horizon for {} s, past horizonWarnAfter ({} s): {}."
          + " While it is open PostgreSQL removes no dead row versions, so Queen's pushes, pops and acks slow as it ages"
          + " (and tables bloat); end it, or bound such sessions with idle_in_transaction_session_timeout",
          node, Math.round(h.heldSeconds()), warnAfter.toSeconds(), h.who());
    }
    if (over) {
      warnedHeld = h.heldSeconds();
    }
  }
}
