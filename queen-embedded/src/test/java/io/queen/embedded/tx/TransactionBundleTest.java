package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.queen.AckOutcome;
import io.queen.AckStatus;
import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.KvReason;
import io.queen.Message;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.Transaction;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/** queen.transaction(): pushes, acks and KV operations in one commit, all or nothing. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TransactionBundleTest {
  private static final KvOptions DAY = Kv.ttl(Duration.ofDays(1));
  private Queen queen;
  private String q;
  private String ns;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("tx1").start();
    String name = info.getTestMethod().orElseThrow().getName();
    q = "q-" + name;
    ns = "ns." + name;
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private Message popOne(String queue) {
    List<Message> got = queen.queue(queue).consumer().batch(1).pop();
    assertThat(got).hasSize(1);
    return got.get(0);
  }

  @Test
  void pushAckAndOnceCommitTogether() {
    queen.queue(q).partition("orders").push(Map.of("order", 42));
    Message m = popOne(q);

    CommitResult res = queen.transaction()
        .once(ns, "charge:42", DAY.required())
        .push(q + "-receipts", "42", Map.of("receipt", 42))
        .ack(m)
        .commit();

    assertThat(res.success()).isTrue();
    assertThat(res.reason()).isNull();
    assertThat(res.failedOperation()).isEqualTo(-1);
    assertThat(res.writes()).singleElement().satisfies(w -> assertThat(w.applied()).isTrue());
    assertThat(res.pushes()).singleElement().satisfies(p -> assertThat(p.status()).isEqualTo(PushStatus.QUEUED));
    assertThat(res.acks()).singleElement().satisfies(a -> assertThat(a.outcome()).isEqualTo(AckOutcome.ACKED));

    assertThat(queen.kv().get(ns, "charge:42").found()).isTrue();
    assertThat(queen.queue(q + "-receipts").consumer().batch(10).pop()).hasSize(1);
    assertThat(queen.queue(q).consumer().batch(10).pop()).as("the ack committed").isEmpty();
  }

  @Test
  void requiredLostPreconditionRollsBackEverythingAndCarriesTheWinnersValue() {
    queen.kv().put(ns, "charge:7", Map.of("id", "ch_winner"), DAY);
    queen.queue(q).push(Map.of("order", 7));
    Message m = popOne(q);

    CommitResult res = queen.transaction()
        .push(q + "-receipts", "7", Map.of("receipt", 7))
        .putIfAbsent(ns, "charge:7", Map.of("id", "ch_loser"), DAY.required())
        .put(ns, "audit:7", "written?", DAY)
        .ack(m)
        .commit();

    assertThat(res.success()).isFalse();
    assertThat(res.reason()).isEqualTo(CommitResult.Reason.KV_PRECONDITION);
    assertThat(res.failedOperation()).as("index in the order the bundle was built").isEqualTo(1);
    assertThat(res.value().get("id").asText()).as("the winner's value, no second round trip").isEqualTo("ch_winner");
    assertThat(res.version()).isEqualTo(queen.kv().get(ns, "charge:7").version());
    assertThat(res.writes()).singleElement().satisfies(w -> assertThat(w.reason()).isEqualTo(KvReason.EXISTS));
    assertThat(res.pushes()).isEmpty();

    assertThat(queen.queue(q + "-receipts").consumer().batch(10).pop()).as("the push rolled back").isEmpty();
    assertThat(queen.kv().get(ns, "audit:7").found()).as("later operations never ran").isFalse();
    // the ack rolled back with the marker: the message is still ours to take off the cursor
    assertThat(queen.ack(m).outcome()).isEqualTo(AckOutcome.ACKED);
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();
  }

  @Test
  void nonRequiredLostPreconditionIsReportedAndTheRestCommits() {
    queen.kv().put(ns, "seen", "earlier", DAY);
    CommitResult res = queen.transaction()
        .putIfAbsent(ns, "seen", "now", DAY)
        .put(ns, "cas", "x", DAY.expect(5))
        .incr(ns, "count", 1, DAY)
        .push(q, "p", Map.of("n", 1))
        .commit();

    assertThat(res.success()).isTrue();
    assertThat(res.writes()).extracting(w -> w.applied()).containsExactly(false, false, true);
    assertThat(res.writes()).extracting(w -> w.reason()).containsExactly(KvReason.EXISTS, KvReason.ABSENT, null);
    assertThat(res.writes().get(0).value().asText()).isEqualTo("earlier");
    assertThat(queen.kv().get(ns, "count").value().asLong()).isEqualTo(1);
    assertThat(queen.kv().get(ns, "cas").found()).as("a conditional write that matched nothing created nothing").isFalse();
    assertThat(queen.queue(q).consumer().batch(10).pop()).hasSize(1);
  }

  @Test
  void requiredIncrOverItsLimitFailsTheBundle() {
    KvOptions window = Kv.ttl(Duration.ofMinutes(1)).max(2).required();
    for (int i = 0; i < 2; i++) {
      assertThat(queen.transaction().incr(ns, "tenant:acme", 1, window).push(q, "acme", Map.of("i", i)).commit().success())
          .isTrue();
    }
    CommitResult third = queen.transaction().incr(ns, "tenant:acme", 1, window).push(q, "acme", Map.of("i", 2)).commit();
    assertThat(third.success()).isFalse();
    assertThat(third.reason()).isEqualTo(CommitResult.Reason.KV_PRECONDITION);
    assertThat(third.writes().get(0).reason()).isEqualTo(KvReason.LIMIT);
    assertThat(third.value().asLong()).isEqualTo(2);
    assertThat(queen.queue(q).consumer().batch(10).pop()).hasSize(2);
  }

  @Test
  void ackWithLostLeaseRollsBackEverything() {
    queen.queue(q).push(Map.of("n", 1));
    Message zombie = queen.queue(q).consumer().leaseTime(Duration.ofMillis(100)).pop().get(0);
    // the lease expires and another consumer takes the message over
    List<Message> takeover = await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
        .until(() -> queen.queue(q).consumer().pop(), l -> !l.isEmpty());

    CommitResult res = queen.transaction()
        .put(ns, zombie.stateKey("total"), 100, Kv.forever())
        .push(q + "-out", "p", Map.of("from", "zombie"))
        .ack(zombie)
        .commit();

    assertThat(res.success()).isFalse();
    assertThat(res.reason()).isEqualTo(CommitResult.Reason.LEASE_LOST);
    assertThat(res.failedOperation()).isEqualTo(2);
    assertThat(res.acks()).singleElement().satisfies(a -> assertThat(a.outcome()).isEqualTo(AckOutcome.LEASE_LOST));
    assertThat(queen.kv().get(ns, zombie.stateKey("total")).found()).as("the zombie's state write never lands").isFalse();
    assertThat(queen.queue(q + "-out").consumer().batch(10).pop()).isEmpty();

    assertThat(queen.transaction().ack(takeover.get(0)).commit().success()).as("the rightful holder").isTrue();
  }

  @Test
  void touchingAKeyTwiceIsRejectedBeforeAnythingIsSent() {
    Transaction tx = queen.transaction().put(ns, "k", 1, DAY);
    assertThatThrownBy(() -> tx.incr(ns, "k", 1, DAY)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at most once");
    assertThatThrownBy(() -> tx.get(ns, "k")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tx.getMany(ns, List.of("other", "k"))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> queen.transaction().getMany(ns, List.of("a", "a"))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> queen.transaction().once(ns, "m", DAY).delete(ns, "m"))
        .isInstanceOf(IllegalArgumentException.class);

    // the failed calls recorded nothing: "other" is still free, and the same key in another namespace is another key
    CommitResult res = tx.get(ns, "other").put(ns + ".b", "k", 2, DAY).commit();
    assertThat(res.success()).isTrue();
    assertThat(queen.kv().get(ns, "k").value().asInt()).isEqualTo(1);
    assertThat(queen.kv().get(ns + ".b", "k").value().asInt()).isEqualTo(2);
  }

  @Test
  void invalidOperationsFailWhenAdded() {
    Transaction tx = queen.transaction();
    assertThatThrownBy(() -> tx.put("bad ns", "k", 1, DAY)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tx.put(ns, "k", "x".repeat(70_000), DAY)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tx.incr(ns, "k", 1, DAY.expect(1))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> tx.push("bad queue!", "p", 1)).isInstanceOf(IllegalArgumentException.class);
    assertThat(tx.put(ns, "k", 1, DAY).commit().success()).as("the failed calls left no trace").isTrue();
  }

  @Test
  void getPrefixIsNotPartOfABundle() {
    // the boundary is the cost: unbounded read work inside the transaction that holds the locks
    assertThat(Arrays.stream(Transaction.class.getMethods()).map(Method::getName)).doesNotContain("getPrefix");
  }

  @Test
  void readsInsideTheBundleAreReturnedInOrder() {
    queen.kv().put(ns, "a", "A", DAY);
    queen.kv().put(ns, "c", null, DAY);
    CommitResult res = queen.transaction()
        .get(ns, "a")
        .incr(ns, "n", 5, DAY)
        .getMany(ns, List.of("c", "b"))
        .commit();
    assertThat(res.success()).isTrue();
    assertThat(res.reads()).extracting(r -> r.key()).containsExactly("a", "c", "b");
    assertThat(res.reads()).extracting(r -> r.found()).containsExactly(true, true, false);
    assertThat(res.reads().get(1).value().isNull()).isTrue();
    assertThat(res.writes().get(0).longValue()).isEqualTo(5);
  }

  @Test
  void operationsRunInTheOrderBuiltAndStopAtTheFirstFailure() {
    queen.kv().put(ns, "first", 1, DAY);
    queen.kv().put(ns, "second", 1, DAY);
    CommitResult res = queen.transaction()
        .incr(ns, "counter", 1, DAY)
        .once(ns, "first", DAY.required())
        .once(ns, "second", DAY.required())
        .commit();
    assertThat(res.failedOperation()).isEqualTo(1);
    assertThat(queen.kv().get(ns, "counter").found()).isFalse();
  }

  @Test
  void aBundleCommitsOnce() {
    Transaction tx = queen.transaction().put(ns, "k", 1, DAY);
    assertThat(tx.commit().success()).isTrue();
    assertThatThrownBy(tx::commit).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> tx.put(ns, "k2", 1, DAY)).isInstanceOf(IllegalStateException.class);
    assertThat(queen.transaction().commit().success()).as("an empty bundle commits nothing, successfully").isTrue();
  }

  @Test
  void handlerFailingBeforeCommitLeavesNoMarker() {
    queen.queue(q).push(Map.of("order", 9));
    Message first = popOne(q);
    Transaction attempt = queen.transaction().once(ns, "charge:9", DAY.required()).ack(first);
    try {
      throw new IllegalStateException("card network timeout"); // the handler fails before commit
    } catch (IllegalStateException e) {
      queen.ack(first, AckStatus.FAILED, e.getMessage());
    }
    assertThat(attempt).isNotNull();
    assertThat(queen.kv().get(ns, "charge:9").found()).as("no marker blocks the retry").isFalse();

    Message retry = popOne(q);
    assertThat(retry.id()).isEqualTo(first.id());
    assertThat(retry.attempt()).isEqualTo(2);
    CommitResult res = queen.transaction().once(ns, "charge:9", DAY.required()).ack(retry).commit();
    assertThat(res.success()).isTrue();
    assertThat(queen.kv().get(ns, "charge:9").found()).isTrue();
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();
  }

  @Test
  void aCommittedPushWakesAWaitingConsumer() throws Exception {
    queen.queue(q).consumer().batch(1).pop(); // subscribe the default group
    CompletableFuture<List<Message>> waiting = CompletableFuture.supplyAsync(
        () -> queen.queue(q).consumer().waitFor(Duration.ofSeconds(20)).pop());
    Thread.sleep(200); // let the pop start waiting
    long t0 = System.nanoTime();
    assertThat(queen.transaction().push(q, "p", Map.of("n", 1)).commit().success()).isTrue();
    assertThat(waiting.get(10, TimeUnit.SECONDS)).hasSize(1);
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(5));
  }
}
