package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.AckOutcome;
import io.queen.CommitResult;
import io.queen.Json;
import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvReason;
import io.queen.KvWriteResult;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * The idempotency shape of a bundle, KV writes then acks, runs as one call that undoes itself; these
 * tests hold it to the same all-or-nothing rules as the general path.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvThenAckBundleTest {
  private Queen queen;
  private String q;
  private String ns;

  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    queen = EmbeddedQueen.builder().dataSource(ds).meterRegistry(registry).start();
    q = "kta-" + info.getTestMethod().orElseThrow().getName();
    ns = q;
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  /** How many bundles went as one statement ("applied") or fell back to the general call ("fallback"). */
  private long markerStatements(String outcome) {
    var c = registry.find("queen.transactions.marker_statement").tag("outcome", outcome).counter();
    return c == null ? 0 : (long) c.count();
  }

  private List<Message> popTwo(Duration lease) {
    queen.queue(q).partition("p").pushAll(List.of(Map.of("i", 0), Map.of("i", 1)));
    return queen.queue(q).consumer().batch(2).leaseTime(lease).pop();
  }

  @Test
  void markersAndAckCommitTogether() {
    List<Message> batch = popTwo(Duration.ofSeconds(30));
    CommitResult res = queen.transaction().once(ns, "a", Kv.ttl(Duration.ofHours(1)).required())
        .once(ns, "b", Kv.ttl(Duration.ofHours(1)).required()).ack(batch).commit();
    assertThat(res.success()).isTrue();
    assertThat(res.writes()).extracting(w -> w.applied()).containsExactly(true, true);
    assertThat(res.acks()).extracting(a -> a.outcome()).containsOnly(AckOutcome.ACKED);
    assertThat(queen.kv().get(ns, "a").found()).isTrue();
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
    assertThat(markerStatements("applied")).as("one statement did it").isEqualTo(1);
    assertThat(markerStatements("fallback")).isZero();
    assertThat(registry.get("queen.messages.acked").tag("queue", q).counter().count())
        .as("a bundle's acks count as acks").isEqualTo(2);
  }

  @Test
  void aLostRequiredWriteUndoesEarlierWritesAndTheAck() {
    queen.kv().put(ns, "b", Map.of("winner", true), Kv.forever());
    List<Message> batch = popTwo(Duration.ofSeconds(30));
    CommitResult res = queen.transaction().once(ns, "a", Kv.ttl(Duration.ofHours(1)).required())
        .once(ns, "b", Kv.ttl(Duration.ofHours(1)).required()).ack(batch).commit();
    assertThat(res.success()).isFalse();
    assertThat(res.reason()).isEqualTo(CommitResult.Reason.KV_PRECONDITION);
    assertThat(res.failedOperation()).isEqualTo(1);
    assertThat(res.value().get("winner").asBoolean()).isTrue();
    assertThat(res.writes()).singleElement().satisfies(w -> assertThat(w.reason()).isEqualTo(KvReason.EXISTS));
    assertThat(queen.kv().get(ns, "a").found()).as("the first marker was undone").isFalse();
    assertThat(queen.status().queue(q).groups().get(0).leases()).as("the ack was not applied").isEqualTo(1);
    assertThat(queen.ack(batch)).extracting(a -> a.outcome()).containsOnly(AckOutcome.ACKED);
    assertThat(markerStatements("fallback")).as("the existing key sent it the general way").isEqualTo(1);
  }

  @Test
  void aNonRequiredWriteThatDoesNotApplyLetsTheRestCommit() {
    queen.kv().put(ns, "b", true, Kv.forever());
    List<Message> batch = popTwo(Duration.ofSeconds(30));
    CommitResult res = queen.transaction().once(ns, "a", Kv.ttl(Duration.ofHours(1)))
        .once(ns, "b", Kv.ttl(Duration.ofHours(1))).ack(batch).commit();
    assertThat(res.success()).isTrue();
    assertThat(res.writes()).extracting(w -> w.applied()).containsExactly(true, false);
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
  }

  @Test
  void aLostLeaseUndoesTheMarkers() {
    List<Message> zombie = popTwo(Duration.ofMillis(200));
    List<Message> holder = List.of();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (holder.isEmpty() && System.nanoTime() < deadline) {
      holder = queen.queue(q).consumer().batch(2).waitFor(Duration.ofMillis(200)).pop();
    }
    assertThat(holder).isNotEmpty();
    CommitResult res = queen.transaction().once(ns, "z", Kv.ttl(Duration.ofHours(1)).required()).ack(zombie).commit();
    assertThat(res.success()).isFalse();
    assertThat(res.reason()).isEqualTo(CommitResult.Reason.LEASE_LOST);
    assertThat(res.failedOperation()).isEqualTo(1);
    assertThat(res.acks()).extracting(a -> a.outcome()).contains(AckOutcome.LEASE_LOST);
    assertThat(queen.kv().get(ns, "z").found()).as("a zombie's marker never lands").isFalse();
    assertThat(markerStatements("fallback")).as("the lost lease sent it the general way").isEqualTo(1);
    queen.ack(holder);
  }

  // ---- the marker path: put-if-absent writes then acks go as one plain statement, falling back when it cannot apply

  @Test
  void aMarkerAnswersWithWhatWasStored() {
    List<Message> batch = popTwo(Duration.ofSeconds(30));
    CommitResult res = queen.transaction().putIfAbsent(ns, "ttl", Map.of("id", "ch_1"), Kv.ttl(Duration.ofHours(1)).required())
        .once(ns, "forever", Kv.forever().required()).ack(batch).commit();
    assertThat(res.success()).isTrue();
    KvWriteResult ttl = res.writes().get(0);
    KvEntry stored = queen.kv().get(ns, "ttl");
    assertThat(ttl.applied()).isTrue();
    assertThat(ttl.found()).isTrue();
    assertThat(ttl.version()).isPositive().isEqualTo(stored.version());
    assertThat(ttl.value()).isEqualTo(stored.value());
    assertThat(ttl.expiresAt()).as("the expiry the database stored, to the microsecond").isEqualTo(stored.expiresAt());
    KvWriteResult forever = res.writes().get(1);
    assertThat(forever.expiresAt()).isNull();
    assertThat(queen.kv().get(ns, "forever").expiresAt()).isNull();
    assertThat(markerStatements("applied")).isEqualTo(1);
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
  }

  @Test
  void aMarkerAnswersWithTheValueAsJsonbStoredIt() {
    List<Message> batch = popTwo(Duration.ofSeconds(30));
    CommitResult res = queen.transaction().putIfAbsent(ns, "n", Json.of("{\"amount\": 1.0E7}"), Kv.ttl(Duration.ofHours(1)))
        .ack(batch).commit();
    assertThat(res.success()).isTrue();
    assertThat(res.writes().get(0).value()).isEqualTo(queen.kv().get(ns, "n").value());
    assertThat(res.writes().get(0).value().get("amount").asText()).isEqualTo("10000000");
    assertThat(markerStatements("applied")).as("values other than true take the same one statement").isEqualTo(1);
  }

  @Test
  void aMarkerWinsOverAnExpiredRowStillInTheTable(DataSource ds) throws SQLException {
    queen.close();
    queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).meterRegistry(registry).start(); // no sweeper: the expired row stays
    long oldVersion = queen.kv().put(ns, "old", Map.of("stale", true), Kv.ttl(Duration.ofMillis(50))).version();
    await().atMost(Duration.ofSeconds(10)).until(() -> !queen.kv().get(ns, "old").found());
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from queen.kv where namespace = '" + ns + "' and key = 'old'")) {
      rs.next();
      assertThat(rs.getInt(1)).as("the expired row is still there (not swept)").isEqualTo(1);
    }
    List<Message> batch = popTwo(Duration.ofSeconds(30));
    CommitResult res = queen.transaction().once(ns, "old", Kv.ttl(Duration.ofHours(1)).required()).ack(batch).commit();
    assertThat(res.success()).isTrue();
    assertThat(res.writes()).singleElement().satisfies(w -> {
      assertThat(w.applied()).isTrue();
      assertThat(w.version()).as("a fresh key over the expired row: a version the row never had")
          .isGreaterThan(oldVersion);
    });
    assertThat(queen.kv().get(ns, "old").value().asBoolean()).isTrue();
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
    assertThat(markerStatements("fallback")).as("the expired row is a row: the general way wins over it").isEqualTo(1);
  }

  @Test
  void twoConsumersRacingForOneMarkerHaveOneWinnerAndTheLosersAckDoesNotLand(DataSource ds) throws Exception {
    queen.queue(q).partition("a").push(Map.of("i", 0));
    queen.queue(q).partition("b").push(Map.of("i", 1));
    List<Message> first = queen.queue(q).consumer().partition("a").leaseTime(Duration.ofSeconds(30)).pop();
    List<Message> second = queen.queue(q).consumer().partition("b").leaseTime(Duration.ofSeconds(30)).pop();
    assertThat(first).hasSize(1);
    assertThat(second).hasSize(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try (Connection a = ds.getConnection()) {
      a.setAutoCommit(false);
      CommitResult won = queen.transaction().putIfAbsent(ns, "charge:1", Map.of("id", "ch_A"), Kv.ttl(Duration.ofHours(1)).required())
          .ack(first).commit(a);
      assertThat(won.success()).isTrue();
      // B's marker insert waits on A's uncommitted row, then meets A's commit
      CompletableFuture<CommitResult> lost = CompletableFuture.supplyAsync(() -> queen.transaction()
          .putIfAbsent(ns, "charge:1", Map.of("id", "ch_B"), Kv.ttl(Duration.ofHours(1)).required()).ack(second).commit(), pool);
      await().atMost(Duration.ofSeconds(10)).until(() -> waitingOnALock(ds));
      a.commit();
      CommitResult b = lost.get(30, TimeUnit.SECONDS);
      assertThat(b.success()).isFalse();
      assertThat(b.reason()).isEqualTo(CommitResult.Reason.KV_PRECONDITION);
      assertThat(b.value().get("id").asText()).isEqualTo("ch_A");
      assertThat(b.version()).as("A's version").isEqualTo(won.writes().get(0).version());
      assertThat(markerStatements("fallback")).as("B met A's key and went the general way").isEqualTo(1);
    } finally {
      pool.shutdownNow();
    }
    assertThat(queen.kv().get(ns, "charge:1").value().get("id").asText()).isEqualTo("ch_A");
    assertThat(queen.status().queue(q).groups().get(0).leases()).as("B's lease is still held: its ack did not land")
        .isEqualTo(1);
    assertThat(queen.ack(second)).extracting(a -> a.outcome()).containsOnly(AckOutcome.ACKED);
  }

  private static boolean waitingOnALock(DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from pg_stat_activity where datname = current_database()"
            + " and wait_event_type = 'Lock'")) {
      rs.next();
      return rs.getInt(1) > 0;
    }
  }
}
