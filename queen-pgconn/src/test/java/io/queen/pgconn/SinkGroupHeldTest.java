package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A sink that exists keeps its consumer group from being removed as idle, paused or not: it resumes where it stopped.
 * Deleted, its group is an idle group like any other.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SinkGroupHeldTest {

  private static long groupCount(TestDatabase db, String group) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from queen.consumer_groups where name = '" + group + "'")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private static void ageGroups(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.executeUpdate("update queen.consumer_groups set last_active_at = now() - interval '30 days'");
    }
  }

  @Test
  void aPausedSinksGroupStaysAndADeletedSinksGroupGoes(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table held (id text primary key, v int)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).pollInterval(Duration.ofMillis(100))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.queue("held-q").push(Map.of("id", "a", "v", 1));
      queen.connectors().put("held", """
          {"kind": "sink", "sink": {"queue": "held-q", "table": "public.held", "mode": "upsert"}}""");
      await().atMost(Duration.ofSeconds(20)).until(() -> queen.connectors().status("held")
          .map(ConnectorStatus::counters).map(m -> m.getOrDefault("applied", 0L)).orElse(0L) == 1);
      queen.connectors().setEnabled("held", false);
      ageGroups(db);
      reReadOnce(queen, "marker-1"); // a re-read of the registry after the ageing: it holds the sink's group
      queen.runRetentionNow();
      assertThat(groupCount(db, "pg-held")).isOne();

      queen.connectors().setEnabled("held", true);
      queen.queue("held-q").push(Map.of("id", "b", "v", 2));
      await().atMost(Duration.ofSeconds(20)).until(() -> queen.connectors().status("held")
          .map(ConnectorStatus::counters).map(m -> m.getOrDefault("applied", 0L)).orElse(0L) == 1
          && countRows(db) == 2);

      queen.connectors().delete("held");
      reReadOnce(queen, "marker-2"); // every re-read that still saw the sink has ended
      queen.runRetentionNow(); // writes the use recorded while the sink existed
      ageGroups(db); // ... and then nobody uses the group for 30 days
      queen.runRetentionNow();
      assertThat(groupCount(db, "pg-held")).isZero();
    }
  }

  /**
   * Waits for a re-read of the registry that began after this call: a sink put now on a queue nobody pushes to is
   * started by the first re-read that sees it (status code queue_missing), and each re-read holds the groups of the
   * sinks it reads before it starts any.
   */
  private static void reReadOnce(Queen queen, String marker) {
    queen.connectors().put(marker, "{\"kind\": \"sink\", \"sink\": {\"queue\": \"" + marker
        + "-q\", \"table\": \"public.held\", \"mode\": \"upsert\"}}");
    await().atMost(Duration.ofSeconds(20)).until(() -> queen.connectors().status(marker)
        .map(ConnectorStatus::errorCode).filter("queue_missing"::equals).isPresent());
    queen.connectors().delete(marker);
  }

  private static long countRows(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from held")) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
