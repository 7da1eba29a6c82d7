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
 * V42, what V41's sequence of KV versions left open during a rolling upgrade: a role granted Queen's tables before the
 * upgrade could not write KV at all (the sequence was new and not granted). And a node started on a schema a newer node
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
  void aNodeOnASchemaANewerVersionMigratedSaysSo(TestDatabase db) throws Exception {
    String schema = "kv_rollout_newer";
    try (Queen first = EmbeddedQueen.builder().dataSource(db.dataSource()).schema(schema).listen(false).start()) {
      first.queue("q").push(Map.of("i", 1));
    }
    exec(db, "insert into " + schema + ".schema_version (module, version, name) values ('queen', 999, 'V999__from_the_future.sql')");
    try (LogCapture logs = LogCapture.start();
        Queen behind = EmbeddedQueen.builder().dataSource(db.dataSource()).schema(schema).listen(false).start()) {
      assertThat(logs.linesWith("WARN", "schema " + schema + " is at V999, newer than this node's", "upgrade this one"))
          .hasSize(1);
      assertThat(behind.queue("q").consumer().pop()).hasSize(1);
    }
  }
}
