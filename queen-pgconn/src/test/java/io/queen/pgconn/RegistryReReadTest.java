package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RegistryReReadTest {

  static long count(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from notes")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  @Test
  void aPutOnOneNodeStartsTheSinkOnAnotherAndDeleteStopsIt(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table notes (id bigint primary key, text text)");
    }
    try (Queen admin = EmbeddedQueen.builder().dataSource(ds).runConnectors(false).start();
        Queen worker = EmbeddedQueen.builder().dataSource(ds).connectorRefresh(Duration.ofMillis(300)).start()) {
      admin.connectors().put("notes", """
          {"kind": "sink", "sink": {"queue": "notes", "table": "notes", "mode": "upsert"}}""");
      admin.queue("notes").push(Map.of("id", 1, "text", "a"));
      await().atMost(10, TimeUnit.SECONDS).until(() -> count(ds) == 1);
      assertThat(worker.connectors().status("notes")).get().extracting(s -> s.phase()).isEqualTo("running");
      assertThat(Thread.getAllStackTraces().keySet()).anyMatch(t -> t.getName().startsWith("queen-" + worker.nodeId()
          + "-pg-notes-"));
      admin.connectors().delete("notes");
      await().atMost(10, TimeUnit.SECONDS).until(() -> Thread.getAllStackTraces().keySet().stream()
          .noneMatch(t -> t.getName().startsWith("queen-" + worker.nodeId() + "-pg-notes-")));
      admin.queue("notes").push(Map.of("id", 2, "text", "b"));
      Thread.sleep(1_000);
      assertThat(count(ds)).isEqualTo(1);
    }
  }
}
