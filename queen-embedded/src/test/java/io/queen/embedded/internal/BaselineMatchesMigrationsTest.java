package io.queen.embedded.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.testkit.QueenPostgres;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The baseline migration plus the function files build the same schema as the numbered migrations they replace
 * (kept for this test in src/test/resources/io/queen/embedded/legacy), compared in the catalogs: tables and their
 * storage options, columns (type, collation, default, not null, identity), indexes, constraints, sequences, composite
 * types, functions (arguments, result, language, volatility, strictness, settings, body with comments and white space
 * left out) and triggers. Only the version tables differ.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BaselineMatchesMigrationsTest {
  private static final List<String> LEGACY = List.of(
      "V1__core.sql", "V2__kv.sql", "V3__kv_batch.sql", "V4__kv_markers.sql", "V5__generic_plans.sql",
      "V6__pop_plans.sql", "V7__ack_rules.sql", "V8__pop_missing_queue.sql", "V9__payload_limits.sql",
      "V10__dead_letter_notice.sql", "V11__node_liveness.sql", "V13__push_ids.sql",
      "V14__group_expiry.sql", "V15__retention.sql", "V16__push_new_partitions.sql",
      "V17__payload_types.sql", "V18__connector_attempts.sql", "V19__push_new_partitions_typed.sql",
      "V21__pop_typed_columns.sql", "V22__ack_settled_batches.sql", "V23__push_created_partitions.sql",
      "V24__messages_vacuum.sql", "V25__partitions_queue_check.sql",
      "V26__ack_drain_in_one_statement.sql", "V27__pop_rotation.sql", "V28__push_partition.sql",
      "V29__lease_lock_order.sql", "V30__ack_settle_and_drain.sql", "V31__stale_statistics.sql",
      "V32__push_receipts.sql", "V33__push_creates_partitions.sql", "V34__push_fast_update.sql",
      "V35__ack_without_join.sql", "V36__push_without_joins.sql", "V37__push_linear_lookups.sql",
      "V38__kv_write_many_linear.sql", "V39__lease_probes_driven_by_items.sql",
      "V40__pop_never_takes_its_own_leases.sql", "V41__kv_versions_never_repeat.sql",
      "V42__kv_versions_rollout.sql", "V43__bundle_kv_ack_fenced.sql",
      "V44__remove_empty_partitions.sql", "V45__lease_across_restart.sql",
      "V46__busy_partitions_keep_their_flag.sql", "V47__live_version_first.sql",
      "V48__no_jit_on_queen_statements.sql", "V49__hinted_pop_keeps_its_tid_scan.sql",
      "V50__group_last_active.sql");

  @Test
  void theBaselineAndTheFunctionFilesBuildTheSchemaTheMigrationsBuilt(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("drop schema if exists legacy_cmp cascade");
      st.execute("create schema legacy_cmp");
      for (String file : LEGACY) {
        String sql;
        try (InputStream in = getClass().getResourceAsStream("/io/queen/embedded/legacy/" + file)) {
          sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        c.setAutoCommit(false);
        st.execute(sql.replace("${schema}", "\"legacy_cmp\"").replace("${schema_literal}", "'legacy_cmp'"));
        c.commit();
        c.setAutoCommit(true);
      }
    }
    Migrator.migrate(ds, "baseline_cmp");
    List<String> legacy = catalog(ds, "legacy_cmp");
    List<String> baseline = catalog(ds, "baseline_cmp");
    assertThat(baseline).hasSizeGreaterThan(90);
    assertThat(baseline).containsExactlyElementsOf(legacy);
  }

  private static List<String> catalog(DataSource ds, String schema) throws Exception {
    String n = "'" + schema + "'";
    List<String> queries = List.of(
        // relations: tables, indexes, sequences, composite types, with their options
        "select 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(array_to_string(c.reloptions, ','), '')"
            + " || ' ' || c.relpersistence::text from pg_class c where c.relnamespace = " + n + "::regnamespace"
            + " and c.relname not like 'schema_version%' and c.relname not like 'function_version%'",
        // columns in order, dropped ones left out
        "select 'col ' || c.relname || ' ' || string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod)"
            + " || ':' || a.attnotnull || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ':' || a.attidentity::text"
            + " || ':' || coalesce(co.collname, ''), ', ' order by a.attnum)"
            + " from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped"
            + " left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum"
            + " left join pg_collation co on co.oid = a.attcollation and a.attcollation <> 100"
            + " where c.relnamespace = " + n + "::regnamespace and c.relkind in ('r', 'c')"
            + " and c.relname not in ('schema_version', 'function_version') group by c.relname",
        "select 'idx ' || pg_get_indexdef(i.indexrelid) from pg_index i join pg_class c on c.oid = i.indrelid"
            + " where c.relnamespace = " + n + "::regnamespace and c.relname not in ('schema_version', 'function_version')",
        "select 'con ' || conrelid::regclass::text || ' ' || conname || ' ' || contype::text || ' ' || pg_get_constraintdef(oid)"
            + " from pg_constraint where connamespace = " + n + "::regnamespace"
            + " and conrelid::regclass::text not like '%schema_version' and conrelid::regclass::text not like '%function_version'",
        "select 'seq ' || c.relname || ' ' || s.seqtypid::regtype || ' ' || s.seqstart || ' ' || s.seqincrement || ' '"
            + " || s.seqmax || ' ' || s.seqmin || ' ' || s.seqcache || ' ' || s.seqcycle"
            + " from pg_sequence s join pg_class c on c.oid = s.seqrelid where c.relnamespace = " + n + "::regnamespace",
        "select 'fn ' || p.oid::regprocedure::text || ' -> ' || pg_get_function_result(p.oid) || ' | '"
            + " || pg_get_function_arguments(p.oid) || ' | ' || l.lanname || ' ' || p.provolatile::text || ' ' || p.proisstrict"
            + " || ' ' || p.prosecdef || ' ' || p.proparallel::text || ' ' || p.procost || ' ' || p.prorows || ' | '"
            + " || coalesce(array_to_string(p.proconfig, ','), '') || ' | '"
            + " || regexp_replace(regexp_replace(p.prosrc, '--[^' || chr(10) || ']*', '', 'g'), '[[:space:]]+', ' ', 'g')"
            + " from pg_proc p join pg_language l on l.oid = p.prolang where p.pronamespace = " + n + "::regnamespace",
        "select 'trg ' || pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text from pg_trigger t join pg_class c on c.oid = t.tgrelid"
            + " where c.relnamespace = " + n + "::regnamespace and not t.tgisinternal");
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      for (String q : queries) {
        try (ResultSet rs = st.executeQuery(q)) {
          while (rs.next()) {
            out.add(rs.getString(1).replace(schema, "S"));
          }
        }
      }
    }
    out.sort(null);
    return out;
  }
}
