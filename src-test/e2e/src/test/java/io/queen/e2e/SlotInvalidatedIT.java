package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A slot PostgreSQL invalidated ({@code max_slot_wal_keep_size}): the source stops with {@code slot_invalidated},
 * never streams on and never recreates the slot by itself; a resync drops it and starts over with a snapshot. The
 * setting is server-wide, so this test runs a PostgreSQL of its own rather than changing the shared test server.
 */
class SlotInvalidatedIT {
  private static final String DOC = "{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.kept\","
      + " \"queue\": \"kept\"}], \"snapshot\": \"initial\"}}";

  @Test
  @Timeout(value = 180, unit = TimeUnit.SECONDS)
  void aSlotPostgreSqlInvalidatedStopsTheSourceUntilAResync() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical")
        .setServerConfig("max_slot_wal_keep_size", "1MB").setPGStartupWait(Duration.ofSeconds(60))
        .setRegisterShutdownHook(false).start()) {
      DataSource ds = pg.getPostgresDatabase();
      sql(ds, "create table kept (id bigint primary key, v text)", "create table filler (id bigserial primary key,"
          + " v text)", "insert into kept values (1, 'a')");
      try (Queen queen = start(ds)) {
        queen.connectors().put("kept-src", DOC);
        awaitPhase(queen, "streaming");
        sql(ds, "insert into kept values (2, 'b')");
        List<String> before = new ArrayList<>();
        await().atMost(Duration.ofSeconds(30)).until(() -> {
          read(queen, "check").forEach(m -> before.add(m.partition() + " " + m.payload().get("op").asText()));
          return before.size() >= 2;
        });
        assertThat(before).containsExactly("1 r", "2 c");
      }
      // the source is stopped; its slot keeps the WAL from here, and PostgreSQL lets only 1 MB of it stay
      for (int i = 0; i < 4; i++) {
        sql(ds, "insert into filler (v) select repeat('x', 500) from generate_series(1, 2000)",
            "select pg_switch_wal()");
      }
      sql(ds, "checkpoint");
      assertThat(query(ds, "select wal_status from pg_replication_slots where slot_name = 'queen_kept_src'"))
          .containsExactly("lost");
      sql(ds, "insert into kept values (3, 'c')"); // its WAL is kept, but the slot cannot read past the hole

      try (Queen queen = start(ds)) {
        awaitPhase(queen, "error");
        ConnectorStatus s = queen.connectors().status("kept-src").orElseThrow();
        assertThat(s.errorCode()).isEqualTo("slot_invalidated");
        assertThat(s.error()).contains("queen_kept_src").contains("resync");
        // over a few retries: still the same error, the slot is not recreated, nothing streamed
        await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(5)).until(() ->
            "slot_invalidated".equals(queen.connectors().status("kept-src").orElseThrow().errorCode()));
        assertThat(query(ds, "select wal_status from pg_replication_slots where slot_name = 'queen_kept_src'"))
            .containsExactly("lost");
        assertThat(read(queen, "check")).isEmpty(); // nothing streamed

        assertThat(queen.connectors().resync("kept-src")).isTrue();
        awaitPhase(queen, "streaming");
        assertThat(query(ds, "select wal_status from pg_replication_slots where slot_name = 'queen_kept_src'"))
            .containsExactly("reserved");
        // the resync's snapshot brings every row as it is now, row 3 included; the stream goes on after it
        List<String> after = new ArrayList<>();
        await().atMost(Duration.ofSeconds(30)).until(() -> {
          read(queen, "check").forEach(m -> after.add(m.partition() + " " + m.payload().get("op").asText()));
          return after.size() >= 3;
        });
        assertThat(after).containsExactlyInAnyOrder("1 r", "2 r", "3 r");
        sql(ds, "insert into kept values (4, 'd')");
        await().atMost(Duration.ofSeconds(30)).until(() -> {
          read(queen, "check").forEach(m -> after.add(m.partition() + " " + m.payload().get("op").asText()));
          return after.size() >= 4;
        });
        assertThat(after).containsExactlyInAnyOrder("1 r", "2 r", "3 r", "4 c");
      }
    }
  }

  private static Queen start(DataSource ds) {
    return EmbeddedQueen.builder().dataSource(ds)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)).sourceLeaseTtl(Duration.ofSeconds(3)))
        .start();
  }

  private static void awaitPhase(Queen queen, String phase) {
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50))
        .until(() -> queen.connectors().status("kept-src").map(ConnectorStatus::phase).orElse("").equals(phase));
  }

  /** Everything the group has not read yet, acknowledged as it is read. */
  private static List<Message> read(Queen queen, String group) {
    List<Message> out = new ArrayList<>();
    while (true) {
      List<Message> got = queen.queue("kept").group(group).subscription(SubscriptionMode.ALL).autoAck(true).batch(100)
          .partitions(100).pop();
      if (got.isEmpty()) {
        return out;
      }
      out.addAll(got);
    }
  }

  private static void sql(DataSource ds, String... statements) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  private static List<String> query(DataSource ds, String q) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(q)) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }
}
