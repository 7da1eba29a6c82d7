package io.queen.embedded.internal.db;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.embedded.spi.SchemaModule;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
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
 * The migrator on a module of its own (src/test/resources/.../internal/migrator): a first release (v1) and the next
 * (v2), which appends a migration, changes a function file, drops an overload, changes a return type and removes a
 * file.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MigratorTest {
  private static final String ROOT = "/io/queen/embedded/internal/migrator/";
  private static final SchemaModule V1 = new SchemaModule("demo", MigratorTest.class, ROOT + "v1",
      List.of("V1__items.sql"), List.of("items_stamp.sql", "item_note.sql", "item_count.sql", "item_total.sql"));
  private static final SchemaModule V2 = new SchemaModule("demo", MigratorTest.class, ROOT + "v2",
      List.of("V1__items.sql", "V2__item_size.sql"), List.of("items_stamp.sql", "item_note.sql", "item_total.sql"));

  @Test
  void aReleaseAppendsMigrationsAndReplacesTheFunctionsWhoseFilesChanged(DataSource ds) throws Exception {
    String s = "mig_demo";
    exec(ds, "drop schema if exists " + s + " cascade");
    // the trigger's function is applied before the migration that creates the trigger (its "requires functions" line)
    assertThat(Migrator.migrate(ds, s, List.of(V1))).containsExactly("demo/items_stamp.sql", "demo/V1__items.sql",
        "demo/item_note.sql", "demo/item_count.sql", "demo/item_total.sql");
    assertThat(Migrator.migrate(ds, s, List.of(V1))).isEmpty();
    exec(ds, "insert into " + s + ".items (id, note) values (1, 'one'), (2, null)");
    assertThat(query(ds, "select " + s + ".item_note(2, 'none') || ' ' || " + s + ".item_note(1) || ' ' || " + s
        + ".item_count() || ' ' || (select bool_and(stamped) from " + s + ".items)")).containsExactly("none one 2 true");
    assertThat(functions(ds, s)).containsExactly("item_count()", "item_note(integer)", "item_note(integer,text)",
        "item_total()", "items_stamp()");

    assertThat(Migrator.migrate(ds, s, List.of(V2))).containsExactly("demo/V2__item_size.sql", "demo/item_note.sql",
        "demo/item_total.sql", "demo/-item_count");
    assertThat(Migrator.migrate(ds, s, List.of(V2))).isEmpty();
    assertThat(functions(ds, s)).containsExactly("item_note(integer)", "item_total()", "items_stamp()");
    assertThat(query(ds, "select " + s + ".item_note(1) || ' ' || pg_typeof(" + s + ".item_total())"))
        .containsExactly("ONE 0 numeric");
    assertThat(query(ds, "select name || ' ' || module from " + s + ".function_version order by name"))
        .containsExactly("item_note demo", "item_total demo", "items_stamp demo");
    assertThat(query(ds, "select module || ' ' || version || ' ' || name from " + s + ".schema_version order by version"))
        .containsExactly("demo 1 V1__items.sql", "demo 2 V2__item_size.sql");
  }

  @Test
  void aNodeOfAnOlderVersionLeavesTheFunctionsANewerOneAppliedAlone(DataSource ds) throws Exception {
    String s = "mig_older";
    exec(ds, "drop schema if exists " + s + " cascade");
    Migrator.migrate(ds, s, List.of(V2));
    exec(ds, "update " + s + ".function_version set queen_version = '99.0.0' where name = 'item_note'");
    try (LogCapture logs = LogCapture.start()) {
      // this node's files (v1's) differ from the recorded ones, and a newer Queen applied item_note: this node is the
      // older one in a rolling upgrade and changes nothing, neither item_note nor the item_count v2 removed
      assertThat(Migrator.migrate(ds, s, List.of(V1))).isEmpty();
      assertThat(logs.linesWith("WARN", "functions [item_note (Queen 99.0.0)] were applied by a newer Queen",
          "upgrade this one")).hasSize(1);
    }
    assertThat(functions(ds, s)).containsExactly("item_note(integer)", "item_total()", "items_stamp()");
  }

  @Test
  void aSchemaOfADevelopmentBuildFromBeforeTheBaselineIsRefused(DataSource ds) throws Exception {
    String s = "mig_dev";
    exec(ds, "drop schema if exists " + s + " cascade", "create schema " + s,
        "create table " + s + ".schema_version (version int primary key, name text not null)");
    assertThatThrownBy(() -> Migrator.migrate(ds, s)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("drop schema mig_dev cascade");
  }

  @Test
  void versionsCompareByTheirNumbers() {
    assertThat(Migrator.compareVersions("0.1.0-SNAPSHOT", "0.1.0")).isZero();
    assertThat(Migrator.compareVersions("0.10.0", "0.9.3")).isPositive();
    assertThat(Migrator.compareVersions("1.0", "1.0.1")).isNegative();
  }

  private static List<String> functions(DataSource ds, String schema) throws Exception {
    return query(ds, "select p.oid::regprocedure::text from pg_proc p where p.pronamespace = '" + schema
        + "'::regnamespace order by 1").stream().map(f -> f.substring(schema.length() + 1)).toList();
  }

  private static void exec(DataSource ds, String... sql) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      for (String q : sql) {
        st.execute(q);
      }
    }
  }

  private static List<String> query(DataSource ds, String sql) throws Exception {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }
}
