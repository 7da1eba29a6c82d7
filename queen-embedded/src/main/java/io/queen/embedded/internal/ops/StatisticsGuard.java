package io.queen.embedded.internal.ops;

import io.queen.QueenDatabaseException;
import io.queen.embedded.internal.db.Sql;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Analyzes Queen's busiest tables when the planner's row count says they are nearly empty and they are not.
 *
 * <p>A vacuum that finds a table without live rows (a queue deleted, a job queue's log drained by retention) records
 * zero rows and keeps the table's pages; until the next analyze the planner takes the table for one row, however much
 * has been written since, and any plan costs the same as any other (queen-embedded README, "Plans that statistics
 * cannot turn"). Autovacuum analyzes such a table at its next visit to the database, which is up to a minute
 * ({@code autovacuum_naptime}) and longer on a busy cluster. Every {@link #PERIOD_MS} on a node with the janitor,
 * this compares each table's {@code pg_class.reltuples} with the live rows the statistics collector counts
 * ({@code pg_stat_user_tables.n_live_tup}) and runs {@code ANALYZE} on a table that holds at least {@link #MIN_ROWS}
 * rows and more than ten times its estimate: a sampled read (at most 30,000 rows at the default statistics target),
 * after which the cached plans are made again. A table never analyzed ({@code reltuples} -1) is left to autovacuum:
 * the planner estimates it from its size. One INFO line per analyze; a role that does not own the tables (and so
 * may not analyze them) is told once at WARN and the guard stops. Runs on the node's janitor thread; {@link #run()} never throws.
 */
public final class StatisticsGuard implements Runnable {
  private static final Logger LOG = LoggerFactory.getLogger(StatisticsGuard.class);
  /** How often the estimates are compared. */
  public static final long PERIOD_MS = 10_000;
  /** Tables below this many live rows are left alone: any plan reads them quickly. */
  static final long MIN_ROWS = 1_000;
  private static final String[] TABLES = {"messages", "partitions", "cursors", "redeliveries", "dead_letters", "kv",
      "push_receipts"};

  private final String node;
  private final DataSource ds;
  private final String schema;
  private boolean failing;
  private boolean stopped;

  public StatisticsGuard(String node, DataSource ds, String quotedSchema) {
    this.node = node;
    this.ds = ds;
    this.schema = quotedSchema;
  }

  /** A table whose estimate is far below its live rows; {@code may}: the role owns it (or is a member of its owner). */
  record Stale(String table, long estimate, long live, boolean may) {}

  @Override
  public void run() {
    if (stopped) {
      return;
    }
    try {
      for (Stale s : check()) {
        if (s.may()) {
          analyze(s);
        } else if (!stopped) {
          // ANALYZE of a table the role does not own is skipped with a warning, not an error: say it here, once
          stopped = true;
          LOG.warn("{} - the role does not own {}.{} and may not analyze it; stale row estimates of Queen's tables"
              + " are left to autovacuum", node, schema, s.table());
        }
      }
      if (failing) {
        failing = false;
        LOG.info("{} - table statistics are checked again", node);
      }
    } catch (RuntimeException e) {
      String state = e instanceof QueenDatabaseException q ? q.sqlState() : null;
      if ("42501".equals(state)) {
        stopped = true;
        LOG.warn("{} - the role may not analyze Queen's tables in {} ({}); stale row estimates are left to"
            + " autovacuum", node, schema, Sql.describe(e));
      } else if ("55P03".equals(state)) {
        LOG.debug("{} - a table was busy (vacuum or analyze running); checking again in {} ms", node, PERIOD_MS);
      } else if (!failing) {
        failing = true;
        LOG.warn("{} - could not check the table statistics ({}); trying again every {} ms", node,
            Sql.describe(e), PERIOD_MS);
      }
    }
  }

  /** The tables to analyze now. */
  List<Stale> check() {
    return Sql.autoCommit(ds, "statistics check", c -> {
      List<Stale> out = new ArrayList<>();
      try (PreparedStatement st = c.prepareStatement("select c.relname, c.reltuples::bigint, s.n_live_tup,"
          + " pg_has_role(c.relowner, 'USAGE')"
          + " from pg_class c join pg_stat_user_tables s on s.relid = c.oid"
          + " where c.relnamespace = ?::regnamespace and c.relname = any(?) and c.reltuples >= 0"
          + " and s.n_live_tup >= ? and s.n_live_tup > 10 * c.reltuples order by c.relname")) {
        st.setString(1, schema);
        st.setArray(2, c.createArrayOf("text", TABLES));
        st.setLong(3, MIN_ROWS);
        try (ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            out.add(new Stale(rs.getString(1), rs.getLong(2), rs.getLong(3), rs.getBoolean(4)));
          }
        }
      }
      return out;
    });
  }

  private void analyze(Stale s) {
    long started = System.nanoTime();
    Sql.inTransaction(ds, "analyze " + s.table(), c -> {
      try (Statement st = c.createStatement()) {
        st.execute("set local lock_timeout = '1s'"); // a vacuum or another node's analyze: next period
        // the table name is one of TABLES, the schema quoted by the builder's validation
        st.execute("analyze " + schema + "." + s.table());
      }
      return null;
    });
    LOG.info("{} - analyzed {}.{}: the planner's statistics counted {} rows, the table holds about {} ({} ms)",
        node, schema, s.table(), s.estimate(), s.live(), (System.nanoTime() - started) / 1_000_000);
  }
}
