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
import java.util.List;
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
    try (Queen admin = EmbeddedQueen.builder().dataSource(ds)
        .connectors(ConnectorOptions.defaults().run(false)).start();
        Queen worker = EmbeddedQueen.builder().dataSource(ds)
            .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(300))).start()) {
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

  /**
   * A document deleted and put again at once must not keep its version: the other nodes compare versions, and a
   * per-row counter restarted at 1, so they went on running the old document (here: writing into the old table).
   */
  @Test
  void aDocumentDeletedAndPutAgainIsRunByEveryNodeInItsNewForm(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table old_t (id text primary key, n int)");
      st.execute("create table new_t (id text primary key, n int)");
    }
    try (Queen admin = EmbeddedQueen.builder().dataSource(ds)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start();
        Queen other = EmbeddedQueen.builder().dataSource(ds)
            .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      admin.connectors().put("moved", """
          {"kind": "sink", "sink": {"queue": "moved", "table": "old_t", "mode": "upsert"}}""");
      await().atMost(10, TimeUnit.SECONDS).until(() -> "running".equals(other.connectors().status("moved")
          .orElseThrow().phase()));
      long before = version(ds, "moved");
      admin.connectors().delete("moved");
      admin.connectors().put("moved", """
          {"kind": "sink", "sink": {"queue": "moved", "table": "new_t", "mode": "upsert"}}""");
      assertThat(version(ds, "moved")).isGreaterThan(before);
      Thread.sleep(1_000); // both nodes re-read several times
      List<io.queen.PushItem> items = new java.util.ArrayList<>();
      for (int i = 0; i < 40; i++) {
        items.add(io.queen.PushItem.of("p" + i, Map.of("id", "k" + i, "n", i)));
      }
      admin.queue("moved").push(items);
      await().atMost(20, TimeUnit.SECONDS).until(() -> rows(ds, "new_t") + rows(ds, "old_t") == 40);
      assertThat(rows(ds, "old_t")).as("no node ran the old document").isZero();
    }
  }

  static long version(DataSource ds, String name) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select version from queen.connectors where name = '" + name + "'")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  static long rows(DataSource ds, String table) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from " + table)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
