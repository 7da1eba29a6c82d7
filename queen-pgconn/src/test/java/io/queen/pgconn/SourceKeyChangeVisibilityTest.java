package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A key change's unchanged TOASTed values are read back from the table, and the read must wait until the change is
 * visible. Its commit record is flushed, so decoded and sent, before the transaction leaves the running set (a
 * moment; under synchronous replication until a standby answers). A fault campaign found the moved row's
 * {@code c} event without its value, and the cdc copy with NULL for good. Here a synchronous standby that does not
 * exist holds the commit until the stream's read-back is seen waiting for it: the event still carries the value.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SourceKeyChangeVisibilityTest {

  @Test
  void aKeyChangeHeldBeforeItIsVisibleStillCarriesItsToastedValue(TestDatabase db) throws Exception {
    String big = "x".repeat(5000);
    sql(db, "create table moving (id bigint primary key, v int, doc text)",
        "alter table moving alter column doc set storage external", // TOASTed without compression
        "insert into moving values (1, 1, '" + big + "')");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("moving-src", """
          {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.moving", "queue": "moving"}]}}""");
      await().atMost(Duration.ofSeconds(30))
          .until(() -> queen.connectors().status("moving-src").orElseThrow().phase().equals("streaming"));
      CompletableFuture<Void> move;
      try {
        sql(db, "alter system set synchronous_standby_names = 'queen_no_such_standby'", "select pg_reload_conf()");
        move = CompletableFuture.runAsync(() -> {
          try (Connection c = db.connection(); Statement st = c.createStatement()) {
            st.execute("set synchronous_commit = on");
            st.execute("update moving set id = 2, v = 2 where id = 1"); // waits for the standby after its flush
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        });
        await().atMost(Duration.ofSeconds(20)).until(() -> waitingForStandby(db));
        // the stream has decoded the commit and met the key change: its read-back waits, asking for snapshots
        await().atMost(Duration.ofSeconds(20)).until(() -> readBackWaiting(db));
      } finally {
        sql(db, "alter system reset synchronous_standby_names", "select pg_reload_conf()");
      }
      move.get(20, TimeUnit.SECONDS);
      List<Message> got = new ArrayList<>();
      await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(50)).until(() -> {
        got.addAll(queen.queue("moving").group("reader").subscription(SubscriptionMode.ALL).autoAck(true).batch(10)
            .pop());
        return got.size() >= 2;
      });
      assertThat(got).extracting(m -> m.payload().get("op").asText() + " " + m.partition())
          .containsExactlyInAnyOrder("d 1", "c 2");
      JsonNode created = got.stream().filter(m -> m.partition().equals("2")).findFirst().orElseThrow().payload();
      assertThat(created.get("after").has("doc")).as("the c event: unchanged=%s", created.get("unchanged")).isTrue();
      assertThat(created.get("after").get("doc").asText()).isEqualTo(big);
      assertThat(created.has("unchanged")).isFalse();
      assertThat(queen.connectors().status("moving-src").orElseThrow().phase()).isEqualTo("streaming");
    }
  }

  private static boolean waitingForStandby(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from pg_stat_activity where wait_event = 'SyncRep'")) {
      rs.next();
      return rs.getInt(1) > 0;
    }
  }

  private static boolean readBackWaiting(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from pg_stat_activity where application_name ="
            + " 'queen-source-moving-src' and query like 'select pg_current_snapshot()%'")) {
      rs.next();
      return rs.getInt(1) > 0;
    }
  }

  private static void sql(TestDatabase db, String... statements) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("set synchronous_commit = local"); // this test's own statements never wait for the standby
      for (String s : statements) {
        st.execute(s);
      }
    }
  }
}
