package io.queen.embedded.internal;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Applies the versioned migrations shipped in the jar ({@code io/queen/embedded/migration/V<n>__<name>.sql})
 * to the configured schema, each in its own transaction, under a transaction-level advisory lock, and
 * records them in {@code <schema>.schema_version}. Re-runnable: applied versions are skipped. In the
 * scripts, {@code ${schema}} stands for the quoted schema name.
 */
public final class Migrator {
  private static final Logger LOG = LoggerFactory.getLogger(Migrator.class);
  /** The migrations, in order. A new one is appended here and shipped as a resource. */
  static final List<String> MIGRATIONS = List.of("V1__core.sql", "V2__kv.sql", "V3__kv_batch.sql", "V4__kv_markers.sql",
      "V5__generic_plans.sql", "V6__pop_plans.sql", "V7__ack_rules.sql", "V8__pop_missing_queue.sql",
      "V9__payload_limits.sql", "V10__dead_letter_notice.sql", "V11__node_liveness.sql", "V13__push_ids.sql",
      "V14__group_expiry.sql", "V15__retention.sql", "V16__push_new_partitions.sql", "V17__payload_types.sql",
      "V18__connector_attempts.sql", "V19__push_new_partitions_typed.sql", "V21__pop_typed_columns.sql",
      "V22__ack_settled_batches.sql", "V23__push_created_partitions.sql", "V24__messages_vacuum.sql",
      "V25__partitions_queue_check.sql", "V26__ack_drain_in_one_statement.sql", "V27__pop_rotation.sql",
      "V28__push_partition.sql", "V29__lease_lock_order.sql",
      "V30__ack_settle_and_drain.sql", "V31__stale_statistics.sql", "V32__push_receipts.sql",
      "V33__push_creates_partitions.sql", "V34__push_fast_update.sql",
      "V35__ack_without_join.sql", "V36__push_without_joins.sql",
      "V37__push_linear_lookups.sql", "V38__kv_write_many_linear.sql",
      "V39__lease_probes_driven_by_items.sql",
      "V40__pop_never_takes_its_own_leases.sql", "V41__kv_versions_never_repeat.sql",
      "V42__kv_versions_rollout.sql", "V43__bundle_kv_ack_fenced.sql", "V44__remove_empty_partitions.sql", "V45__lease_across_restart.sql",
      "V46__busy_partitions_keep_their_flag.sql", "V47__live_version_first.sql",
      "V48__no_jit_on_queen_statements.sql", "V49__hinted_pop_keeps_its_tid_scan.sql",
      "V50__group_last_active.sql", "V51__fresh_partitions_drop_their_flag.sql");
  private static final long LOCK_KEY = 0x5155_4545_4e00_0001L; // "QUEEN" + 1

  private Migrator() {}

  /** Migrates {@code schema}; returns the versions applied now (empty when it was up to date). */
  public static List<Integer> migrate(DataSource ds, String schema) {
    if (upToDate(ds, schema)) {
      return List.of();
    }
    List<Integer> applied = new ArrayList<>();
    for (String file : MIGRATIONS) {
      int version = Integer.parseInt(file.substring(1, file.indexOf("__")));
      String sql = load(file).replace("${schema}", Sql.quoteIdent(schema)).replace("${schema_literal}", "'" + schema + "'");
      try (Connection c = ds.getConnection()) {
        c.setAutoCommit(false);
        try (Statement st = c.createStatement()) {
          st.execute("select pg_advisory_xact_lock(" + LOCK_KEY + ")");
          st.execute("create schema if not exists " + Sql.quoteIdent(schema));
          st.execute("create table if not exists " + Sql.quoteIdent(schema) + ".schema_version ("
              + "version int primary key, name text not null, applied_at timestamptz not null default now())");
          boolean done;
          try (PreparedStatement ps = c.prepareStatement("select 1 from " + Sql.quoteIdent(schema)
              + ".schema_version where version = ?")) {
            ps.setInt(1, version);
            try (ResultSet rs = ps.executeQuery()) {
              done = rs.next();
            }
          }
          if (!done) {
            st.execute(sql);
            try (PreparedStatement ps = c.prepareStatement("insert into " + Sql.quoteIdent(schema)
                + ".schema_version(version, name) values (?, ?)")) {
              ps.setInt(1, version);
              ps.setString(2, file);
              ps.executeUpdate();
            }
            applied.add(version);
          }
          c.commit();
        } catch (SQLException e) {
          c.rollback();
          throw e;
        } finally {
          c.setAutoCommit(true);
        }
      } catch (SQLException e) {
        throw Sql.translate("migrate " + file, e);
      }
    }
    if (!applied.isEmpty()) {
      LOG.info("schema {}: applied migrations {}", schema, applied);
    }
    return applied;
  }

  /**
   * Whether every migration is recorded already: then start-up reads one row count and runs no DDL, so a role that
   * uses the tables without owning them or the database (migrated by another role) can start a node.
   */
  private static boolean upToDate(DataSource ds, String schema) {
    String table = Sql.quoteIdent(schema) + ".schema_version";
    try (Connection c = ds.getConnection()) {
      // a plain read of the catalogs, not to_regclass: a name looked up and not found is remembered by the
      // backend's catalog cache, and the same pooled connection's "create schema if not exists" after another
      // node created it (invalidations are not read while waiting for the advisory lock) would fail on a
      // duplicate key
      try (PreparedStatement ps = c.prepareStatement("select exists (select 1 from pg_catalog.pg_class t"
          + " join pg_catalog.pg_namespace n on n.oid = t.relnamespace where n.nspname = ? and t.relname = 'schema_version')")) {
        ps.setString(1, schema);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          if (!rs.getBoolean(1)) {
            return false;
          }
        }
      }
      try (PreparedStatement ps = c.prepareStatement("select count(*) filter (where version = any(?)), max(version)"
          + " from " + table)) {
        Integer[] versions = MIGRATIONS.stream().map(f -> Integer.parseInt(f.substring(1, f.indexOf("__"))))
            .toArray(Integer[]::new);
        ps.setArray(1, c.createArrayOf("int4", versions));
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          int newest = versions[versions.length - 1];
          if (rs.getInt(2) > newest) {
            // a node of a newer version migrated it: this one runs on it, and an operator midway through a rolling
            // upgrade wants to know which nodes are behind
            LOG.warn("schema {} is at V{}, newer than this node's V{} (Queen {}): a node of a newer version migrated it;"
                + " upgrade this one", schema, rs.getInt(2), newest, io.queen.Queen.version());
          }
          return rs.getInt(1) == versions.length;
        }
      }
    } catch (SQLException e) {
      throw Sql.translate("read the schema version", e);
    }
  }

  private static String load(String file) {
    String path = "/io/queen/embedded/migration/" + file;
    try (InputStream in = Migrator.class.getResourceAsStream(path)) {
      if (in == null) {
        throw new IllegalStateException("migration " + path + " is missing from the jar");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read migration " + path, e);
    }
  }
}
