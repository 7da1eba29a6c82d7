package io.queen.embedded.kv;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.Kv;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.Statement;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A rolling upgrade that adds the sequence of KV versions (schema version 42 grants it): a role granted Queen's tables
 * before the upgrade must still write KV (the sequence is new and was not granted to it). And a node started on a schema a newer node
 * migrated says so.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvVersionsRolloutTest {
  private static final String SCHEMA = "kv_rollout";
  private static final String ROLE = "kv_rollout_app";

  private static void exec(TestDatabase db, String... sql) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : sql) {
        st.execute(s);
      }
    }
  }

  @Test
  void aRoleGrantedTheTablesBeforeTheUpgradeKeepsWritingKv(TestDatabase db) throws Exception {
    // the schema as an upgrade finds it: the owner migrated it, the application's role was granted what existed,
    // and the grant of the KV version sequence (schema version 42) has not run
    try (Queen owner = EmbeddedQueen.builder().dataSource(db.dataSource()).schema(SCHEMA).listen(false).start()) {
      owner.kv().put("ns", "warm", Map.of("v", 1), Kv.forever());
    }
    exec(db, "delete from " + SCHEMA + ".schema_version where version = 42",
        "drop role if exists " + ROLE, "create role " + ROLE + " login password 'kvr'",
        "grant usage on schema " + SCHEMA + " to " + ROLE,
        "grant all on all tables in schema " + SCHEMA + " to " + ROLE,
        "grant execute on all functions in schema " + SCHEMA + " to " + ROLE);
    exec(db, "revoke all on sequence " + SCHEMA + ".kv_versions from " + ROLE);
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(db.jdbcUrl());
    config.setUsername(ROLE);
    config.setPassword("kvr");
    config.setMaximumPoolSize(4);
    try (HikariDataSource appPool = new HikariDataSource(config)) {
      // the owner's node of this version migrates: the role is granted the sequence in the same step
      try (Queen owner = EmbeddedQueen.builder().dataSource(db.dataSource()).schema(SCHEMA).listen(false).start()) {
        assertThat(owner.kv().get("ns", "warm").found()).isTrue();
      }
      try (Queen app = EmbeddedQueen.builder().dataSource(appPool).schema(SCHEMA).listen(false).start()) {
        assertThat(app.kv().put("ns", "k", Map.of("v", 2), Kv.forever()).applied()).isTrue();
        assertThat(app.kv().incr("ns", "n", 1, Kv.forever()).applied()).isTrue();
      }
    } finally {
      exec(db, "drop owned by " + ROLE, "drop role " + ROLE);
    }
  }

  @Test
  void aNodeOnASchemaANewerVersionMigratedSaysSo(TestDatabase db) throws Exception {
    String schema = "kv_rollout_newer";
    try (Queen first = EmbeddedQueen.builder().dataSource(db.dataSource()).schema(schema).listen(false).start()) {
      first.queue("q").push(Map.of("i", 1));
    }
    exec(db, "insert into " + schema + ".schema_version (version, name) values (999, 'V999__from_the_future.sql')");
    try (LogCapture logs = LogCapture.start();
        Queen behind = EmbeddedQueen.builder().dataSource(db.dataSource()).schema(schema).listen(false).start()) {
      assertThat(logs.linesWith("WARN", "schema " + schema + " is at V999, newer than this node's", "upgrade this one"))
          .hasSize(1);
      assertThat(behind.queue("q").consumer().pop()).hasSize(1);
    }
  }
}
