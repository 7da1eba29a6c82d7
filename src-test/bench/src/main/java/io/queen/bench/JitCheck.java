package io.queen.bench;

import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * Counts the statements the server JIT-compiled in the benchmark's database, Queen's and the baselines' alike: a
 * compile costs tens of milliseconds per execution, so one on a hot statement would make every figure of its phase
 * meaningless. Uses {@code pg_stat_statements} with nested statements tracked (statements inside Queen's functions
 * included); it must be in {@code shared_preload_libraries}. On a server without JIT (the embedded one) there is
 * nothing to count.
 */
final class JitCheck {

  /** Whether the server can JIT-compile, with jit on. */
  private final boolean jit;
  /** Whether pg_stat_statements is loaded and was set up for the database. */
  private final boolean counting;
  private final String why;

  private JitCheck(boolean jit, boolean counting, String why) {
    this.jit = jit;
    this.counting = counting;
    this.why = why;
  }

  /**
   * Prepares the count for {@code db}: must run before any connection to it is opened for the benchmark, since the
   * tracking level is set for the database and applies to sessions that start afterwards.
   */
  static JitCheck prepare(TestDatabase db) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      boolean jit;
      String preload;
      try (ResultSet rs = st.executeQuery("select pg_jit_available() and current_setting('jit')::boolean,"
          + " current_setting('shared_preload_libraries')")) {
        rs.next();
        jit = rs.getBoolean(1);
        preload = rs.getString(2);
      }
      if (!jit) {
        return new JitCheck(false, false, "this server cannot JIT-compile (pg_jit_available() false, or jit off)");
      }
      if (!preload.contains("pg_stat_statements")) {
        return new JitCheck(true, false, "this server has JIT on, but pg_stat_statements is not in"
            + " shared_preload_libraries: JIT compilations cannot be counted");
      }
      st.execute("create extension if not exists pg_stat_statements");
      st.execute("alter database " + db.name() + " set pg_stat_statements.track = 'all'");
      st.execute("select pg_stat_statements_reset(0, (select oid from pg_database where datname = current_database()), 0)");
      return new JitCheck(true, true, null);
    }
  }

  /** The lines to print; {@code failures} gets one entry when a statement was compiled. */
  List<String> report(TestDatabase db, List<String> failures) throws SQLException {
    List<String> out = new ArrayList<>();
    if (!counting) {
      out.add((jit ? "WARN: JIT check not run: " : "JIT check: nothing to count: ") + why);
      return out;
    }
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*), coalesce(sum(calls), 0),"
            + " count(*) filter (where jit_functions > 0), coalesce(sum(jit_functions), 0)"
            + " from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())")) {
      rs.next();
      long compiled = rs.getLong(3);
      out.add("FIGURE jit_compiled_statements " + compiled + " statements");
      out.add("JIT check: " + rs.getLong(1) + " statements run " + rs.getLong(2) + " times; " + compiled
          + " JIT-compiled (" + rs.getLong(4) + " functions)");
      if (compiled > 0) {
        failures.add("jit_check: " + compiled + " statement(s) were JIT-compiled (listed above)");
        try (ResultSet top = st.executeQuery("select calls, jit_functions, round((jit_generation_time"
            + " + jit_inlining_time + jit_optimization_time + jit_emission_time)::numeric, 1),"
            + " left(regexp_replace(query, '\\s+', ' ', 'g'), 160) from pg_stat_statements"
            + " where dbid = (select oid from pg_database where datname = current_database()) and jit_functions > 0"
            + " order by jit_functions desc limit 20")) {
          while (top.next()) {
            out.add("  JIT-compiled: calls " + top.getLong(1) + ", functions " + top.getLong(2) + ", "
                + top.getString(3) + " ms compiling: " + top.getString(4));
          }
        }
      }
    }
    return out;
  }
}
