package io.queen.embedded.internal.db;

import io.queen.embedded.spi.SchemaModule;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Brings Queen's schema to what this node's jar holds, for the core and for every {@link SchemaModule} a connector
 * module adds. Two kinds of files (see {@link SchemaModule}):
 *
 * <ul>
 *   <li><b>Migrations</b> ({@code sql/migrations/V<n>__<name>.sql}: tables, indexes, types, sequences, triggers) run
 *       once each, in order, each in its own transaction, recorded in {@code <schema>.schema_version (module, version)}.
 *       They only append: a released migration is never edited.</li>
 *   <li><b>Function files</b> ({@code sql/functions/<function>.sql}: {@code create or replace function} with its
 *       settings, every overload of one name) are applied after the migrations whenever the file's SHA-256 differs from
 *       the one recorded in {@code <schema>.function_version (name)}, all of a module in one transaction, so a node
 *       never sees half of a release's functions. The overloads of the name that the file no longer defines are
 *       dropped (the ones whose catalog row the file did not write). A {@code create or replace} that PostgreSQL
 *       refuses because the return type, an argument's name or a default changed drops every overload of the name and
 *       runs the file again. A file removed from a module's list drops the functions of its name.</li>
 * </ul>
 *
 * Everything runs under one transaction-level advisory lock, so nodes that start together apply each file once. A
 * node that finds functions a newer Queen version applied is the older one in a rolling upgrade: it changes nothing
 * (it would put older bodies back, or functions the newer version removed) and says so; applyFunction checks the
 * same again under the lock, for a newer node that migrated meanwhile.
 * When every migration is recorded and every checksum matches, start-up reads the two tables and runs no DDL: a role
 * that uses the tables without owning them (migrated by an owner role) can start a node.
 */
public final class Migrator {
  private static final Logger LOG = LoggerFactory.getLogger(Migrator.class);
  private static final long LOCK_KEY = 0x5155_4545_4e00_0001L; // "QUEEN" + 1
  /** The migration's line that names the function files it needs applied before it runs. */
  private static final Pattern REQUIRES = Pattern.compile("(?m)^-- requires functions: *([a-z0-9_, ]+)$");

  /** The core: queues, partitions, messages, groups, cursors, dead letters, KV, nodes, retention. */
  public static final SchemaModule CORE = new SchemaModule("queen", Migrator.class, "/io/queen/embedded/sql",
      List.of("V1__baseline.sql"),
      // dependencies first: a language sql function's body is checked when it is created
      List.of("refresh_pending.sql", "dead_letter.sql", "ensure_queue.sql", "ensure_group.sql", "group_expiry.sql",
          "partitions_queue_exists.sql", "queues_delete_partitions.sql", "queue_sealed.sql", "remove_empty_partitions.sql",
          "push.sql", "push_fast.sql", "push_partition.sql", "pop.sql", "ack.sql", "renew.sql", "release.sql",
          "shrink_lease.sql", "seek.sql", "retention_step.sql",
          "kv_check.sql", "kv_value.sql", "kv_expiry.sql", "kv_put.sql", "kv_put_if_absent.sql", "kv_incr.sql",
          "kv_delete.sql", "kv_sweep.sql", "kv_write_many.sql", "bundle_lease_lost.sql",
          "bundle_kv_ack_fenced.sql"));

  private Migrator() {}

  /** Migrates the core into {@code schema}; returns what was applied now (empty when it was up to date). */
  public static List<String> migrate(DataSource ds, String schema) {
    return migrate(ds, schema, List.of(CORE));
  }

  /**
   * Migrates {@code modules}, in order, into {@code schema}; returns the files applied now ({@code queen/V1__baseline.sql},
   * {@code queen/pop.sql}, ...), empty when everything was up to date.
   */
  public static List<String> migrate(DataSource ds, String schema, List<SchemaModule> modules) {
    Map<SchemaModule, Map<String, String>> files = new HashMap<>();
    for (SchemaModule m : modules) {
      Map<String, String> texts = new HashMap<>();
      for (String f : m.functions()) {
        texts.put(f, load(m, "functions/" + f));
      }
      files.put(m, texts);
    }
    if (upToDate(ds, schema, modules, files)) {
      return List.of();
    }
    List<String> applied = new ArrayList<>();
    for (SchemaModule m : modules) {
      for (String file : m.migrations()) {
        inLockedTransaction(ds, schema, m.name() + "/" + file, c -> applyMigration(c, schema, m, file, files.get(m), applied));
      }
      inLockedTransaction(ds, schema, m.name() + " functions", c -> applyFunctions(c, schema, m, files.get(m), applied));
    }
    if (!applied.isEmpty()) {
      LOG.info("schema {}: applied {}", schema, applied);
    }
    return applied;
  }

  @FunctionalInterface
  private interface Step {
    void run(Connection c) throws SQLException;
  }

  private static void inLockedTransaction(DataSource ds, String schema, String what, Step step) {
    String s = Sql.quoteIdent(schema);
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.execute("select pg_advisory_xact_lock(" + LOCK_KEY + ")");
        st.execute("create schema if not exists " + s);
        refuseDevelopmentLayout(c, schema);
        st.execute("create table if not exists " + s + ".schema_version (module text not null, version int not null,"
            + " name text not null, applied_at timestamptz not null default now(), primary key (module, version))");
        st.execute("create table if not exists " + s + ".function_version (name text primary key, module text not null,"
            + " checksum text not null, queen_version text not null, applied_at timestamptz not null default now())");
        step.run(c);
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      } finally {
        c.setAutoCommit(true);
      }
    } catch (SQLException e) {
      throw Sql.translate("migrate " + what, e);
    }
  }

  private static void applyMigration(Connection c, String schema, SchemaModule m, String file,
      Map<String, String> functions, List<String> applied) throws SQLException {
    int version = SchemaModule.version(file);
    try (PreparedStatement ps = c.prepareStatement("select 1 from " + Sql.quoteIdent(schema)
        + ".schema_version where module = ? and version = ?")) {
      ps.setString(1, m.name());
      ps.setInt(2, version);
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          return;
        }
      }
    }
    String text = load(m, "migrations/" + file);
    Matcher needs = REQUIRES.matcher(text);
    while (needs.find()) {
      for (String name : needs.group(1).split(",")) {
        String f = name.trim() + ".sql";
        if (!functions.containsKey(f)) {
          throw new IllegalStateException("migration " + file + " of " + m.name() + " requires " + f
              + ", which is not in the module's function files");
        }
        applyFunction(c, schema, m, f, functions.get(f), applied);
      }
    }
    try (Statement st = c.createStatement()) {
      st.execute(substitute(text, schema));
    }
    try (PreparedStatement ps = c.prepareStatement("insert into " + Sql.quoteIdent(schema)
        + ".schema_version(module, version, name) values (?, ?, ?)")) {
      ps.setString(1, m.name());
      ps.setInt(2, version);
      ps.setString(3, file);
      ps.executeUpdate();
    }
    applied.add(m.name() + "/" + file);
  }

  private static void applyFunctions(Connection c, String schema, SchemaModule m, Map<String, String> functions,
      List<String> applied) throws SQLException {
    for (String f : m.functions()) {
      applyFunction(c, schema, m, f, functions.get(f), applied);
    }
    // files this module no longer ships: their functions go
    List<String> gone = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement("select name from " + Sql.quoteIdent(schema)
        + ".function_version where module = ? and not (name = any(?)) order by name")) {
      ps.setString(1, m.name());
      ps.setArray(2, c.createArrayOf("text", m.functions().stream().map(Migrator::functionName).toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          gone.add(rs.getString(1));
        }
      }
    }
    for (String name : gone) {
      for (String signature : signatures(c, schema, name).keySet()) {
        try (Statement st = c.createStatement()) {
          st.execute("drop function " + signature);
        }
      }
      try (PreparedStatement ps = c.prepareStatement("delete from " + Sql.quoteIdent(schema)
          + ".function_version where name = ?")) {
        ps.setString(1, name);
        ps.executeUpdate();
      }
      applied.add(m.name() + "/-" + name);
    }
  }

  /** Applies one function file when its checksum is not the one recorded (see the class comment). */
  private static void applyFunction(Connection c, String schema, SchemaModule m, String file, String text,
      List<String> applied) throws SQLException {
    String name = functionName(file);
    String checksum = checksum(text);
    String s = Sql.quoteIdent(schema);
    try (PreparedStatement ps = c.prepareStatement("select checksum, queen_version, module from " + s
        + ".function_version where name = ?")) {
      ps.setString(1, name);
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          if (!rs.getString(3).equals(m.name())) {
            throw new IllegalStateException("function " + name + " of module " + m.name() + " is recorded for module "
                + rs.getString(3));
          }
          if (rs.getString(1).equals(checksum)) {
            return;
          }
          if (compareVersions(rs.getString(2), io.queen.Queen.version()) > 0) {
            LOG.warn("schema {}: function {} was applied by Queen {}, newer than this node's {}; left as it is",
                schema, name, rs.getString(2), io.queen.Queen.version());
            return;
          }
        }
      }
    }
    Map<String, String> before = signatures(c, schema, name);
    String sql = substitute(text, schema);
    Savepoint sp = c.setSavepoint();
    try (Statement st = c.createStatement()) {
      st.execute(sql);
      c.releaseSavepoint(sp);
    } catch (SQLException e) {
      // 42P13: create or replace cannot change a function's return type, an argument's name or its defaults
      if (!"42P13".equals(e.getSQLState())) {
        throw e;
      }
      c.rollback(sp);
      try (Statement st = c.createStatement()) {
        for (String signature : before.keySet()) {
          st.execute("drop function " + signature);
        }
        st.execute(sql);
      }
      before = Map.of();
    }
    // the overloads the file did not write (same catalog row version as before) are no longer in it
    for (Map.Entry<String, String> e : signatures(c, schema, name).entrySet()) {
      if (e.getValue().equals(before.get(e.getKey()))) {
        try (Statement st = c.createStatement()) {
          st.execute("drop function " + e.getKey());
        }
      }
    }
    try (PreparedStatement ps = c.prepareStatement("insert into " + s + ".function_version (name, module, checksum,"
        + " queen_version) values (?, ?, ?, ?) on conflict (name) do update set module = excluded.module,"
        + " checksum = excluded.checksum, queen_version = excluded.queen_version, applied_at = now()")) {
      ps.setString(1, name);
      ps.setString(2, m.name());
      ps.setString(3, checksum);
      ps.setString(4, io.queen.Queen.version());
      ps.executeUpdate();
    }
    applied.add(m.name() + "/" + file);
  }

  /** The functions of {@code name} in the schema: signature (regprocedure) to the row version of its catalog row. */
  private static Map<String, String> signatures(Connection c, String schema, String name) throws SQLException {
    Map<String, String> out = new HashMap<>();
    try (PreparedStatement ps = c.prepareStatement("select p.oid::regprocedure::text, p.oid::text || '/' || p.xmin::text"
        + " from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace"
        + " where n.nspname = ? and p.proname = ?")) {
      ps.setString(1, schema);
      ps.setString(2, name);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getString(1), rs.getString(2));
        }
      }
    }
    return out;
  }

  /**
   * Whether every migration is recorded and every function file's checksum matches: then start-up reads the two
   * tables and runs no DDL.
   */
  private static boolean upToDate(DataSource ds, String schema, List<SchemaModule> modules,
      Map<SchemaModule, Map<String, String>> files) {
    String s = Sql.quoteIdent(schema);
    try (Connection c = ds.getConnection()) {
      // a plain read of the catalogs, not to_regclass: a name looked up and not found is remembered by the
      // backend's catalog cache, and the same pooled connection's "create schema if not exists" after another
      // node created it (invalidations are not read while waiting for the advisory lock) would fail on a
      // duplicate key
      try (PreparedStatement ps = c.prepareStatement("select count(*) from pg_catalog.pg_class t"
          + " join pg_catalog.pg_namespace n on n.oid = t.relnamespace where n.nspname = ?"
          + " and t.relname in ('schema_version', 'function_version')")) {
        ps.setString(1, schema);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          if (rs.getInt(1) < 2) {
            return false;
          }
        }
      }
      refuseDevelopmentLayout(c, schema);
      Map<String, Set<Integer>> recorded = new HashMap<>();
      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("select module, version from " + s
          + ".schema_version")) {
        while (rs.next()) {
          recorded.computeIfAbsent(rs.getString(1), k -> new HashSet<>()).add(rs.getInt(2));
        }
      }
      Map<String, String> checksums = new HashMap<>();
      Map<String, String> byModule = new HashMap<>();
      Set<String> newer = new HashSet<>();
      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("select name, checksum, module,"
          + " queen_version from " + s + ".function_version")) {
        while (rs.next()) {
          checksums.put(rs.getString(1), rs.getString(2));
          byModule.put(rs.getString(1), rs.getString(3));
          if (compareVersions(rs.getString(4), io.queen.Queen.version()) > 0) {
            newer.add(rs.getString(1) + " (Queen " + rs.getString(4) + ")");
          }
        }
      }
      if (!newer.isEmpty()) {
        // a node of a newer version applied these: this node is the older one, midway through a rolling upgrade, and
        // changes nothing (it would put older bodies back, or functions the newer version removed)
        LOG.warn("schema {}: functions {} were applied by a newer Queen than this node's {}; this node changes nothing"
            + " in the schema: upgrade this one", schema, new java.util.TreeSet<>(newer), io.queen.Queen.version());
        return true;
      }
      boolean upToDate = true;
      for (SchemaModule m : modules) {
        Set<Integer> versions = recorded.getOrDefault(m.name(), Set.of());
        int newest = SchemaModule.version(m.migrations().get(m.migrations().size() - 1));
        int highest = versions.stream().mapToInt(Integer::intValue).max().orElse(0);
        if (highest > newest) {
          // a node of a newer version migrated it: this one runs on it, and an operator midway through a rolling
          // upgrade wants to know which nodes are behind
          LOG.warn("schema {} is at V{}, newer than this node's V{} (Queen {}): a node of a newer version migrated it;"
              + " upgrade this one", schema, highest, newest, io.queen.Queen.version());
        }
        for (String file : m.migrations()) {
          upToDate &= versions.contains(SchemaModule.version(file));
        }
        Set<String> names = new LinkedHashSet<>();
        for (String f : m.functions()) {
          String name = functionName(f);
          names.add(name);
          upToDate &= checksum(files.get(m).get(f)).equals(checksums.get(name));
        }
        for (Map.Entry<String, String> e : byModule.entrySet()) {
          upToDate &= !e.getValue().equals(m.name()) || names.contains(e.getKey());
        }
      }
      return upToDate;
    } catch (SQLException e) {
      throw Sql.translate("read the schema version", e);
    }
  }

  /**
   * A schema migrated by a development build from before the baseline (its {@code schema_version} has no
   * {@code module} column) cannot be brought forward: nothing of it was released, so it is dropped and created again.
   */
  private static void refuseDevelopmentLayout(Connection c, String schema) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("select exists (select 1 from pg_catalog.pg_attribute a"
        + " join pg_catalog.pg_class t on t.oid = a.attrelid join pg_catalog.pg_namespace n on n.oid = t.relnamespace"
        + " where n.nspname = ? and t.relname = 'schema_version' and a.attnum > 0 and not a.attisdropped)"
        + " and not exists (select 1 from pg_catalog.pg_attribute a"
        + " join pg_catalog.pg_class t on t.oid = a.attrelid join pg_catalog.pg_namespace n on n.oid = t.relnamespace"
        + " where n.nspname = ? and t.relname = 'schema_version' and a.attname = 'module')")) {
      ps.setString(1, schema);
      ps.setString(2, schema);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        if (rs.getBoolean(1)) {
          throw new IllegalStateException("schema " + schema + " was created by a development build of Queen from"
              + " before its SQL baseline (schema_version has no module column); drop the schema (drop schema "
              + schema + " cascade) and start again");
        }
      }
    }
  }

  /** -1, 0 or 1 as Queen version {@code a} is older, the same release, or newer than {@code b} (numbers only). */
  static int compareVersions(String a, String b) {
    String[] x = a.split("-", 2)[0].split("\\.");
    String[] y = b.split("-", 2)[0].split("\\.");
    for (int i = 0; i < Math.max(x.length, y.length); i++) {
      int d = Long.compare(number(x, i), number(y, i));
      if (d != 0) {
        return d;
      }
    }
    return 0;
  }

  private static long number(String[] parts, int i) {
    if (i >= parts.length) {
      return 0;
    }
    try {
      return Long.parseLong(parts[i]);
    } catch (NumberFormatException e) {
      return 0;
    }
  }

  private static String functionName(String file) {
    return file.substring(0, file.length() - ".sql".length());
  }

  private static String substitute(String sql, String schema) {
    return sql.replace("${schema}", Sql.quoteIdent(schema)).replace("${schema_literal}", "'" + schema + "'");
  }

  private static String checksum(String text) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String load(SchemaModule m, String file) {
    String path = m.root() + "/" + file;
    try (InputStream in = m.anchor().getResourceAsStream(path)) {
      if (in == null) {
        throw new IllegalStateException("SQL file " + path + " of " + m.name() + " is missing from the jar");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read SQL file " + path, e);
    }
  }
}
