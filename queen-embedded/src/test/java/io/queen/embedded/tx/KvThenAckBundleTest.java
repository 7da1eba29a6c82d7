package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvReason;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
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

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    queen = EmbeddedQueen.builder().dataSource(ds).start();
    q = "kta-" + info.getTestMethod().orElseThrow().getName();
    ns = q;
  }

  @AfterEach
  void stop() {
    queen.close();
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
    queen.ack(holder);
  }
}
