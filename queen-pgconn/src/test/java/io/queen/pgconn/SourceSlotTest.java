package io.queen.pgconn;

import static io.queen.pgconn.SourceFixture.awaitPhase;
import static io.queen.pgconn.SourceFixture.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.ConnectorStatus;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The slot changed behind the source's back: dropped by hand ({@code slot_lost}, nothing recreated until a resync,
 * which starts a new epoch whose ids never repeat the old ones), or advanced past the pointer while the source was
 * disabled ({@code slot_ahead}, never streams on). The resync snapshots the table again: every existing row as
 * {@code r}. An invalidated slot is not produced here: that needs
 * {@code max_slot_wal_keep_size}, a server-wide setting the shared test server must not change under other tests.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourceSlotTest {
  Queen queen;
  SourceFixture f;

  @BeforeEach
  void start(TestDatabase db) {
    f = new SourceFixture(db);
    queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)).sourceLeaseTtl(Duration.ofSeconds(3)))
        .start();
  }

  @AfterEach
  void stop() {
    queen.connectors().list().forEach(queen.connectors()::delete);
    queen.close();
  }

  List<Message> read(String queue, int n) {
    SourceFixture.Reader r = new SourceFixture.Reader("check");
    await().atMost(Duration.ofSeconds(20)).until(() -> r.drain(queen, queue).total >= n);
    return r.all();
  }

  static String epoch(Message m) {
    return m.transactionId().split(":")[1];
  }

  long slots(String slot) throws Exception {
    return f.count("select count(*) from pg_replication_slots where slot_name = '" + slot + "'");
  }

  @Test
  void aSlotDroppedByHandStopsTheSourceUntilAResyncStartsANewEpoch() throws Exception {
    f.sql("create table lost (id bigint primary key, v text)");
    queen.connectors().put("lost-src", SourceFixture.sourceDoc("public.lost", "lost", "").replace("\"never\"",
        "\"initial\""));
    awaitPhase(queen, "lost-src", "streaming", Duration.ofSeconds(20));
    f.sql("insert into lost values (1, 'a')");
    SourceFixture.Reader reader = new SourceFixture.Reader("check");
    await().atMost(Duration.ofSeconds(20)).until(() -> reader.drain(queen, "lost").total == 1);
    String oldEpoch = epoch(reader.all().get(0));

    // the walsender terminated, then the slot dropped before the owner reconnects
    f.dropSlotByHand("queen_lost_src");
    awaitPhase(queen, "lost-src", "error", Duration.ofSeconds(20));
    ConnectorStatus s = status(queen, "lost-src");
    assertThat(s.errorCode()).isEqualTo("slot_lost");
    assertThat(s.error()).contains("resync");
    f.sql("insert into lost values (2, 'b')"); // lost with the slot: a resync cannot bring it back
    // over several retries: the source never creates a slot by itself
    await().during(Duration.ofMillis(1500)).atMost(Duration.ofSeconds(5)).until(() -> slots("queen_lost_src") == 0
        && "slot_lost".equals(status(queen, "lost-src").errorCode()));

    assertThat(queen.connectors().resync("lost-src")).isTrue();
    awaitPhase(queen, "lost-src", "streaming", Duration.ofSeconds(20));
    assertThat(slots("queen_lost_src")).isOne();
    // the resync's snapshot: every existing row as r (row 2 included), then the stream
    await().atMost(Duration.ofSeconds(20)).until(() -> reader.drain(queen, "lost").total == 3);
    assertThat(reader.all().subList(1, 3)).extracting(m -> m.partition() + " " + m.payload().get("op").asText())
        .containsExactlyInAnyOrder("1 r", "2 r");
    f.sql("insert into lost values (3, 'c')");
    await().atMost(Duration.ofSeconds(20)).until(() -> reader.drain(queen, "lost").total == 4);
    Message after = reader.all().stream().filter(m -> m.partition().equals("3")).findFirst().orElseThrow();
    assertThat(after.payload().get("op").asText()).isEqualTo("c");
    assertThat(epoch(after)).as("a new epoch").isNotEqualTo(oldEpoch).matches("[0-9a-f]{8}");
    assertThat(reader.all().subList(1, 4)).allMatch(m -> epoch(m).equals(epoch(after)));
    assertThat(status(queen, "lost-src").pointer().get("epoch").asText()).isEqualTo(epoch(after));
    assertThat(reader.ids.keySet()).allMatch(id -> id.startsWith("pg:" + oldEpoch + ":") || id.startsWith("pg:"
        + epoch(after) + ":"));
    assertThat(reader.duplicateIds).isZero();
  }

  @Test
  void aSlotAdvancedBehindTheSourcesBackIsRefusedAndNeverStreamsOn() throws Exception {
    f.sql("create table ahead (id bigint primary key, v text)", "create table busy (id bigserial primary key, v text)");
    String doc = SourceFixture.sourceDoc("public.ahead", "ahead", "");
    queen.connectors().put("ahead-src", doc);
    awaitPhase(queen, "ahead-src", "streaming", Duration.ofSeconds(20));
    f.sql("insert into ahead values (1, 'a')");
    read("ahead", 1);
    queen.connectors().put("ahead-src", doc.replace("{\"kind\": \"source\",", "{\"kind\": \"source\", \"enabled\": false,"));
    awaitPhase(queen, "ahead-src", "disabled", Duration.ofSeconds(20));
    await().atMost(Duration.ofSeconds(10)).until(() -> f.count("select count(*) from pg_replication_slots"
        + " where slot_name = 'queen_ahead_src' and not active") == 1);
    f.sql("insert into busy (v) select 'x' from generate_series(1, 100)",
        "insert into ahead values (2, 'b')", // skipped by the advance: the source must not pretend otherwise
        "select pg_replication_slot_advance('queen_ahead_src', pg_current_wal_lsn())");
    queen.connectors().put("ahead-src", doc);
    awaitPhase(queen, "ahead-src", "error", Duration.ofSeconds(20));
    assertThat(status(queen, "ahead-src").errorCode()).isEqualTo("slot_ahead");
    assertThat(status(queen, "ahead-src").error()).contains("resync");
    f.sql("insert into ahead values (3, 'c')");
    // retried several times: still refused, nothing streamed
    await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(6)).until(() ->
        "slot_ahead".equals(status(queen, "ahead-src").errorCode()));
    SourceFixture.Reader reader = new SourceFixture.Reader("check2");
    assertThat(reader.drain(queen, "ahead").total).isEqualTo(1);
  }
}
