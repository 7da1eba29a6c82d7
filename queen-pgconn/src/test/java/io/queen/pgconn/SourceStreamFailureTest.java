package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A change the source cannot push, in a way that does not pass (a row above the node's maxPayloadBytes), stops the
 * stream at that change: the status says {@code error} with {@code stream_failed} and the limit, while it is tried
 * again every refresh; nothing after it is pushed (per partition order and the pointer hold), and a node
 * that can take the row pushes it and everything after it, once.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourceStreamFailureTest {

  @Test
  void aRowAboveMaxPayloadBytesShowsStreamFailedUntilANodeThatTakesItPushesIt(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table notes (id bigint primary key, body text not null)");
    String doc = SourceFixture.sourceDoc("public.notes", "notes", "");
    List<Message> got = new ArrayList<>();
    try (Queen small = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .maxPayloadBytes(4096).start()) {
      small.connectors().put("notes-src", doc);
      SourceFixture.awaitPhase(small, "notes-src", "streaming", Duration.ofSeconds(30));
      f.sql("insert into notes values (1, 'small')");
      f.sql("insert into notes values (2, repeat('x', 10000))", "insert into notes values (3, 'after')");
      await().atMost(Duration.ofSeconds(30)).until(() -> read(small, got) >= 1
          && "error".equals(SourceFixture.status(small, "notes-src").phase()));
      ConnectorStatus s = SourceFixture.status(small, "notes-src");
      assertThat(s.errorCode()).isEqualTo("stream_failed");
      assertThat(s.error()).contains("maxPayloadBytes").doesNotContain("xxxx");
      // it stays there while it is tried again, and nothing after the row gets through
      long errors = s.counters().get("errors");
      await().atMost(Duration.ofSeconds(10)).until(() -> SourceFixture.status(small, "notes-src").counters()
          .get("errors") >= errors + 3);
      assertThat(SourceFixture.status(small, "notes-src")).extracting(ConnectorStatus::phase, ConnectorStatus::errorCode)
          .containsExactly("error", "stream_failed");
      read(small, got);
      assertThat(got).extracting(m -> m.payload().get("key").get("id").asInt()).containsExactly(1);

      // a node with the default limit takes over once this one closes (it gives the lease back)
      try (Queen big = EmbeddedQueen.builder().dataSource(db.dataSource())
          .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
          .start()) {
        small.close();
        SourceFixture.awaitPhase(big, "notes-src", "streaming", Duration.ofSeconds(30));
        await().atMost(Duration.ofSeconds(30)).until(() -> read(big, got) >= 3);
        assertThat(got).extracting(m -> m.payload().get("key").get("id").asInt()).containsExactlyInAnyOrder(1, 2, 3);
        assertThat(SourceFixture.status(big, "notes-src").errorCode()).isNull();
      }
    }
  }

  /**
   * A partitionBy column dropped while the source streams: the next change cannot be placed, and the status names
   * the column in the source's own sentence, not only an exception class. (The owner's next start then refuses the
   * document at setup: partition_column.)
   */
  @Test
  void theStatusNamesWhatTheSourceCouldNotPlace(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table grp (id bigint primary key, region text not null, v int)",
        "alter table grp replica identity full");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofSeconds(1)))
        .start()) {
      queen.connectors().put("grp-src", """
          {"kind": "source", "source": {"snapshot": "never",
            "tables": [{"table": "public.grp", "queue": "grp", "partitionBy": ["region"]}]}}""");
      SourceFixture.awaitPhase(queen, "grp-src", "streaming", Duration.ofSeconds(30));
      f.sql("alter table grp drop column region", "insert into grp values (1, 1)");
      ConnectorStatus failed = await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(10))
          .until(() -> SourceFixture.status(queen, "grp-src"), st -> "stream_failed".equals(st.errorCode()));
      assertThat(failed.error()).contains("partitionBy column 'region' is not a column of public.grp");
      await().atMost(Duration.ofSeconds(30))
          .until(() -> "partition_column".equals(SourceFixture.status(queen, "grp-src").errorCode()));
    }
  }

  /** Pops what is there for group "r" (acked at once) into {@code into}; returns its size. */
  private static int read(Queen queen, List<Message> into) {
    into.addAll(queen.queue("notes").group("r").subscription(SubscriptionMode.ALL).autoAck(true).batch(100)
        .partitions(100).pop());
    return into.size();
  }
}
