package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;
import static org.awaitility.Awaitility.await;

import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A partitioned source table (PostgreSQL's declarative partitioning): the managed publication publishes its changes
 * under the table's own name ({@code publish_via_partition_root}), so the snapshot's rows and the stream's changes
 * both name {@code public.events}; a row that moves to another table partition (its key changes) is a {@code d} in
 * its old Queen partition and a {@code c} in its new one.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourcePartitionedTableTest {

  @Test
  void aPartitionedTableIsSnapshottedAndStreamedUnderItsOwnName(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table events (id bigint not null, at date not null, note text, primary key (id, at))"
            + " partition by range (at)",
        "create table events_2025 partition of events for values from ('2025-01-01') to ('2026-01-01')",
        "create table events_2026 partition of events for values from ('2026-01-01') to ('2027-01-01')",
        "insert into events values (1, '2025-03-01', 'a'), (2, '2026-03-01', 'b')");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("events-src", """
          {"kind": "source", "source": {"tables": [{"table": "public.events", "queue": "events"}]}}""");
      SourceFixture.awaitPhase(queen, "events-src", "streaming", Duration.ofSeconds(30));
      assertThat(f.rows("select pubviaroot from pg_publication where pubname = 'queen_events_src'"))
          .containsExactly("t");
      f.sql("insert into events values (3, '2026-05-01', 'c')");
      f.sql("update events set note = 'a2' where id = 1");
      f.sql("update events set at = '2026-04-01' where id = 1"); // to the other table partition
      f.sql("delete from events where id = 2");
      SourceFixture.Reader r = new SourceFixture.Reader("check");
      await().atMost(Duration.ofSeconds(30)).until(() -> r.drain(queen, "events").total >= 7);
      assertThat(r.total).isEqualTo(7);
      List<Message> all = r.all();
      assertThat(all).extracting(m -> m.payload().get("table").asText()).containsOnly("public.events");
      assertThat(r.byPartition.get("1|2025-03-01")).extracting(m -> m.payload().get("op").asText(),
          m -> m.payload().path("after").path("note").asText(null)).containsExactly(tuple("r", "a"), tuple("u", "a2"),
          tuple("d", null));
      assertThat(r.byPartition.get("1|2026-04-01")).extracting(m -> m.payload().get("op").asText(),
          m -> m.payload().get("after").get("note").asText()).containsExactly(tuple("c", "a2"));
      assertThat(r.byPartition.get("2|2026-03-01")).extracting(m -> m.payload().get("op").asText())
          .containsExactly("r", "d");
      assertThat(r.byPartition.get("3|2026-05-01")).extracting(m -> m.payload().get("op").asText())
          .containsExactly("c");
      assertThat(r.duplicateIds).isZero();
    }
  }
}
