package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import io.queen.AckOutcome;
import io.queen.AckStatus;
import io.queen.Json;
import io.queen.Message;
import io.queen.PayloadSerializationException;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.QueueFullException;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
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

@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PushPopAckTest {
  private Queen queen;
  private DataSource ds;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("t1").start();
    q = "q-" + info.getTestMethod().orElseThrow().getName();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private static Map<String, Object> body(int n) {
    return Map.of("n", n);
  }

  @Test
  void pushThenPopReturnsMessagesInOffsetOrder() {
    List<PushResult> rs = queen.queue(q).partition("p1").pushAll(List.of(body(0), body(1), body(2)));
    assertThat(rs).extracting(PushResult::offset).containsExactly(0L, 1L, 2L);
    assertThat(rs).extracting(PushResult::status).containsOnly(PushStatus.QUEUED);

    List<Message> got = queen.queue(q).consumer().batch(10).pop();
    assertThat(got).extracting(Message::offset).containsExactly(0L, 1L, 2L);
    assertThat(got).extracting(m -> m.payload().get("n").asInt()).containsExactly(0, 1, 2);
    Message m = got.get(0);
    assertThat(m.queue()).isEqualTo(q);
    assertThat(m.partition()).isEqualTo("p1");
    assertThat(m.consumerGroup()).isEqualTo(Queen.DEFAULT_GROUP);
    assertThat(m.leaseId()).isNotNull();
    assertThat(m.attempt()).isEqualTo(1);
    assertThat(m.id()).isEqualTo(rs.get(0).messageId());
    assertThat(m.payload(Map.class)).containsEntry("n", 0);

    assertThat(queen.ack(got)).extracting(r -> r.outcome()).containsOnly(AckOutcome.ACKED);
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();
  }

  /**
   * A push over several existing partitions (push_fast) moves each partition by its own item count (it computes the
   * new offsets per partition and updates the rows without a join), however the items interleave.
   */
  @Test
  void aBatchOverSeveralPartitionsMovesEachPartitionByItsOwnCount() {
    for (String p : List.of("a", "b", "c", "d")) {
      queen.queue(q).partition(p).push(body(-1)); // offset 0 of each
    }
    List<PushResult> rs = queen.queue(q).push(List.of(PushItem.of("c", body(0)), PushItem.of("a", body(1)),
        PushItem.of("c", body(2)), PushItem.of("b", body(3)), PushItem.of("c", body(4)), PushItem.of("a", body(5))));
    assertThat(rs).extracting(PushResult::offset).containsExactly(1L, 1L, 2L, 1L, 3L, 2L);
    List<PushResult> next = queen.queue(q).push(List.of(PushItem.of("a", body(6)), PushItem.of("b", body(7)),
        PushItem.of("c", body(8)), PushItem.of("d", body(9))));
    assertThat(next).extracting(PushResult::offset).containsExactly(3L, 2L, 4L, 1L);

    List<Message> got = queen.queue(q).consumer().batch(100).partitions(4).pop();
    Map<String, List<Long>> offsets = new java.util.TreeMap<>();
    got.forEach(m -> offsets.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m.offset()));
    assertThat(offsets).containsExactly(Map.entry("a", List.of(0L, 1L, 2L, 3L)), Map.entry("b", List.of(0L, 1L, 2L)),
        Map.entry("c", List.of(0L, 1L, 2L, 3L, 4L)), Map.entry("d", List.of(0L, 1L)));
  }

  /**
   * The full push (items with transaction ids) over existing and new partitions at once, with an in-batch duplicate:
   * each partition moves by the items it stored (push computes the new offsets per partition and updates the rows
   * without a join), and the next push continues each one where it stopped.
   */
  @Test
  void aPushWithTransactionIdsOverOldAndNewPartitionsMovesEachByWhatItStored() {
    queen.queue(q).push(List.of(PushItem.of("a", body(0)), PushItem.of("b", body(1)), PushItem.of("b", body(2))));
    List<PushResult> rs = queen.queue(q).push(List.of(PushItem.of("b", body(3)).transactionId("t3"),
        PushItem.of("n", body(4)).transactionId("t4"), PushItem.of("a", body(5)).transactionId("t5"),
        PushItem.of("n", body(6)).transactionId("t4"), PushItem.of("b", body(7)).transactionId("t7"),
        PushItem.of("n", body(8)).transactionId("t8")));
    assertThat(rs).extracting(PushResult::status).containsExactly(PushStatus.QUEUED, PushStatus.QUEUED,
        PushStatus.QUEUED, PushStatus.DUPLICATE, PushStatus.QUEUED, PushStatus.QUEUED);
    assertThat(rs).extracting(PushResult::offset).containsExactly(2L, 0L, 1L, 0L, 3L, 1L);
    List<PushResult> next = queen.queue(q).push(List.of(PushItem.of("a", body(9)), PushItem.of("b", body(10)),
        PushItem.of("n", body(11))));
    assertThat(next).extracting(PushResult::offset).containsExactly(2L, 4L, 2L);
  }

  @Test
  void defaultPartitionAndPayloadKinds() {
    queen.queue(q).push("a string");
    queen.queue(q).push(Json.of("{\"x\": [1, 2]}"));
    queen.queue(q).push(JsonNodeFactory.instance.objectNode().put("k", "v"));
    List<Message> got = queen.queue(q).consumer().batch(10).pop();
    assertThat(got).extracting(Message::partition).containsOnly(Queen.DEFAULT_PARTITION);
    assertThat(got.get(0).payload().asText()).isEqualTo("a string");
    assertThat(got.get(1).payload().get("x").get(1).asInt()).isEqualTo(2);
    assertThat(got.get(2).payload().get("k").asText()).isEqualTo("v");
  }

  @Test
  void duplicateTransactionIdIsReportedAndNotStored() {
    PushResult first = queen.queue(q).partition("p").push(PushItem.of("p", body(1)).transactionId("t-1"));
    PushResult again = queen.queue(q).partition("p").push(PushItem.of("p", body(2)).transactionId("t-1"));
    assertThat(again.status()).isEqualTo(PushStatus.DUPLICATE);
    assertThat(again.messageId()).isEqualTo(first.messageId());
    assertThat(again.offset()).isEqualTo(first.offset());

    List<PushResult> batch = queen.queue(q).push(List.of(PushItem.of("p", body(3)).transactionId("t-2"),
        PushItem.of("p", body(4)).transactionId("t-2"), PushItem.of("other", body(5)).transactionId("t-2")));
    assertThat(batch).extracting(PushResult::status)
        .containsExactly(PushStatus.QUEUED, PushStatus.DUPLICATE, PushStatus.QUEUED);
    assertThat(batch.get(1).messageId()).isEqualTo(batch.get(0).messageId());
    assertThat(batch.get(1).offset()).isEqualTo(1L);

    List<Message> got = queen.queue(q).consumer().batch(10).partitions(5).pop();
    assertThat(got).hasSize(3);
  }

  @Test
  void batchSpanningQueuesCommitsTogether() {
    List<PushResult> rs = queen.push(List.of(PushItem.to(q + "-a", "x", body(1)), PushItem.to(q + "-b", "y", body(2))));
    assertThat(rs).extracting(PushResult::queue).containsExactly(q + "-a", q + "-b");
    assertThat(queen.queue(q + "-a").consumer().pop()).hasSize(1);
    assertThat(queen.queue(q + "-b").consumer().pop()).hasSize(1);
  }

  @Test
  void leaseKeepsOtherConsumersOutUntilItExpiresAndExpiryCountsAnAttempt() {
    queen.queue(q).partition("p").push(body(1));
    List<Message> a = queen.queue(q).consumer().leaseTime(Duration.ofMillis(300)).pop();
    assertThat(a).hasSize(1);
    assertThat(queen.queue(q).consumer().pop()).isEmpty();
    List<Message> b = queen.queue(q).consumer().waitFor(Duration.ofSeconds(5)).pop();
    while (b.isEmpty()) {
      b = queen.queue(q).consumer().waitFor(Duration.ofSeconds(1)).pop();
    }
    assertThat(b).hasSize(1);
    assertThat(b.get(0).offset()).isZero();
    assertThat(b.get(0).attempt()).isEqualTo(2);
    // the first holder's ack is fenced off
    assertThat(queen.ack(a.get(0)).outcome()).isEqualTo(AckOutcome.LEASE_LOST);
    assertThat(queen.ack(b.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
  }

  @Test
  void ackAfterTakeoverIsRejectedAndDoesNotMoveTheCursor() {
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    List<Message> a = queen.queue(q).consumer().batch(2).leaseTime(Duration.ofMillis(200)).pop();
    List<Message> b = List.of();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (b.isEmpty() && System.nanoTime() < deadline) {
      b = queen.queue(q).consumer().batch(2).waitFor(Duration.ofMillis(200)).pop();
    }
    assertThat(b).isNotEmpty();
    assertThat(queen.ack(a)).extracting(r -> r.outcome()).containsOnly(AckOutcome.LEASE_LOST);
    // the cursor did not move: the new holder still owns offset 0
    queen.ack(b);
    List<Message> rest = queen.queue(q).consumer().batch(2).pop();
    assertThat(rest.stream().map(Message::offset).toList()).isSubsetOf(1L);
  }

  @Test
  void prefixAckMovesTheCursorOverThePrefix() {
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1), body(2), body(3)));
    List<Message> got = queen.queue(q).consumer().batch(4).pop();
    // ack out of order: 2 first (remembered), then 0 and 1 close the gap
    assertThat(queen.ack(got.get(2)).outcome()).isEqualTo(AckOutcome.ACKED);
    assertThat(queen.ack(List.of(got.get(0), got.get(1)))).extracting(r -> r.outcome()).containsOnly(AckOutcome.ACKED);
    // lease still held for offset 3
    assertThat(queen.queue(q).consumer().pop()).isEmpty();
    queen.ack(got.get(3));
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
  }

  @Test
  void failedMessageIsRetriedThenDeadLettered() {
    queen.queue(q).configure(c -> c.retryLimit(2));
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    for (int attempt = 1; attempt <= 3; attempt++) {
      List<Message> got = queen.queue(q).consumer().batch(2).pop();
      assertThat(got.get(0).offset()).isZero();
      assertThat(got.get(0).attempt()).isEqualTo(attempt);
      if (attempt > 1) {
        assertThat(got).hasSize(1); // a head that failed before is delivered alone
      }
      AckOutcome expected = attempt <= 2 ? AckOutcome.RETRY_SCHEDULED : AckOutcome.DEAD_LETTERED;
      assertThat(queen.ack(got.get(0), AckStatus.FAILED, "boom " + attempt).outcome()).isEqualTo(expected);
    }
    List<Message> next = queen.queue(q).consumer().batch(2).pop();
    assertThat(next).extracting(Message::offset).containsExactly(1L);
    assertThat(next.get(0).attempt()).isEqualTo(1);
    var dl = queen.deadLetters(q).defaultGroup().list(10, null);
    assertThat(dl).hasSize(1);
    assertThat(dl.get(0).offset()).isZero();
    assertThat(dl.get(0).error()).isEqualTo("boom 3");
    assertThat(dl.get(0).attempts()).isEqualTo(3);
    assertThat(dl.get(0).payload().get("n").asInt()).isZero();
  }

  @Test
  void failureInTheMiddleOfABatchKeepsThePrefixAndRedeliversTheRest() {
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1), body(2), body(3)));
    List<Message> got = queen.queue(q).consumer().batch(4).pop();
    List<io.queen.AckResult> rs = new ArrayList<>();
    rs.addAll(queen.ack(List.of(got.get(0), got.get(1))));
    rs.add(queen.ack(got.get(2), AckStatus.FAILED, "x"));
    rs.add(queen.ack(got.get(3)));
    assertThat(rs).extracting(r -> r.outcome()).containsExactly(AckOutcome.ACKED, AckOutcome.ACKED,
        AckOutcome.RETRY_SCHEDULED, AckOutcome.LEASE_LOST);
    List<Message> again = queen.queue(q).consumer().batch(4).pop();
    assertThat(again).extracting(Message::offset).containsExactly(2L);
  }

  @Test
  void deadLetterStatusSkipsRetries() {
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    List<Message> got = queen.queue(q).consumer().batch(2).pop();
    assertThat(queen.ack(got.get(0), AckStatus.DEAD_LETTER, "poison").outcome()).isEqualTo(AckOutcome.DEAD_LETTERED);
    assertThat(queen.ack(got.get(1)).outcome()).isEqualTo(AckOutcome.ACKED);
    assertThat(queen.deadLetters(q).defaultGroup().count()).isEqualTo(1);
  }

  @Test
  void deadLetterOffSkipsExhaustedMessagesWithoutARow() {
    queen.queue(q).configure(c -> c.retryLimit(0).deadLetter(false));
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    Message m = queen.queue(q).consumer().pop().get(0);
    assertThat(queen.ack(m, AckStatus.FAILED, "x").outcome()).isEqualTo(AckOutcome.DEAD_LETTERED);
    assertThat(queen.deadLetters(q).defaultGroup().count()).isZero();
    assertThat(queen.queue(q).consumer().pop()).extracting(Message::offset).containsExactly(1L);
  }

  @Test
  void retryDelayHoldsTheRedelivery() {
    queen.queue(q).configure(c -> c.retryDelay(Duration.ofMillis(800)));
    queen.queue(q).partition("p").push(body(0));
    Message m = queen.queue(q).consumer().pop().get(0);
    long t0 = System.nanoTime();
    queen.ack(m, AckStatus.FAILED, "later");
    assertThat(queen.queue(q).consumer().pop()).isEmpty();
    List<Message> again = List.of();
    while (again.isEmpty()) {
      again = queen.queue(q).consumer().waitFor(Duration.ofMillis(100)).pop();
    }
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isGreaterThanOrEqualTo(Duration.ofMillis(700));
  }

  @Test
  void delayedProcessingHoldsNewMessages() {
    queen.queue(q).configure(c -> c.delayedProcessing(Duration.ofMillis(800)));
    long t0 = System.nanoTime();
    queen.queue(q).partition("p").push(body(0));
    assertThat(queen.queue(q).consumer().pop()).isEmpty();
    List<Message> got = List.of();
    while (got.isEmpty()) {
      got = queen.queue(q).consumer().waitFor(Duration.ofMillis(100)).pop();
    }
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isGreaterThanOrEqualTo(Duration.ofMillis(700));
  }

  @Test
  void windowBufferWaitsForTheBurstToSettle() {
    queen.queue(q).configure(c -> c.windowBuffer(Duration.ofMillis(800)));
    long t0 = System.nanoTime();
    queen.queue(q).partition("p").push(body(0));
    queen.queue(q).partition("p").push(body(1));
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();
    List<Message> got = List.of();
    while (got.isEmpty()) {
      got = queen.queue(q).consumer().batch(10).waitFor(Duration.ofMillis(100)).pop();
    }
    assertThat(got).hasSize(2);
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isGreaterThanOrEqualTo(Duration.ofMillis(700));
  }

  @Test
  void maxSizeRefusesThePushAndStoresNothingOfIt() {
    queen.queue(q).configure(c -> c.maxSize(3));
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    assertThatThrownBy(() -> queen.queue(q).partition("p").pushAll(List.of(body(2), body(3))))
        .isInstanceOf(QueueFullException.class)
        .hasMessage("queue '" + q + "' is full: 2 stored + 2 pushed > maxSize 3; nothing of the batch was stored");
    assertThat(queen.status().queue(q).messages()).isEqualTo(2);
    queen.queue(q).partition("p").push(body(2));
    assertThat(queen.status().queue(q).messages()).isEqualTo(3);
  }

  @Test
  void batchIsAGlobalCapOverPartitions() {
    for (int p = 0; p < 5; p++) {
      queen.queue(q).partition("p" + p).pushAll(List.of(body(0), body(1), body(2)));
    }
    List<Message> got = queen.queue(q).consumer().batch(7).partitions(5).pop();
    assertThat(got).hasSize(7);
    assertThat(got.stream().map(Message::partition).distinct().count()).isEqualTo(3);
    List<Message> one = queen.queue(q).consumer().batch(100).pop();
    assertThat(one.stream().map(Message::partition).distinct().count()).isEqualTo(1);
  }

  @Test
  void newNamedGroupStartsAtTheEndUnlessAll() {
    queen.queue(q).partition("old").pushAll(List.of(body(0), body(1)));
    assertThat(queen.queue(q).group("late").batch(10).pop()).isEmpty();
    assertThat(queen.queue(q).group("everything").subscription(SubscriptionMode.ALL).batch(10).pop()).hasSize(2);
    queen.queue(q).partition("old").push(body(2));
    queen.queue(q).partition("born-later").push(body(3));
    List<Message> late = queen.queue(q).group("late").batch(10).partitions(2).pop();
    assertThat(late).extracting(m -> m.payload().get("n").asInt()).containsExactlyInAnyOrder(2, 3);
  }

  @Test
  void groupsHaveTheirOwnCursors() {
    queen.queue(q).partition("p").push(body(0));
    List<Message> a = queen.queue(q).group("a").subscription(SubscriptionMode.ALL).pop();
    List<Message> b = queen.queue(q).group("b").subscription(SubscriptionMode.ALL).pop();
    assertThat(a).hasSize(1);
    assertThat(b).hasSize(1);
    queen.ack(a);
    assertThat(queen.queue(q).group("b").pop()).isEmpty(); // b's lease still held
    assertThat(queen.queue(q).consumer().pop()).hasSize(1); // the default group is separate too
  }

  @Test
  void subscriptionFromTimestamp() throws Exception {
    queen.queue(q).partition("p").push(body(0));
    var cut = queen.status().takenAt(); // database time of a transaction that starts after the first push committed
    queen.queue(q).partition("p").push(body(1));
    List<Message> got = queen.queue(q).group("from").subscriptionFrom(cut).batch(10).pop();
    assertThat(got).extracting(m -> m.payload().get("n").asInt()).containsExactly(1);
  }

  @Test
  void seekMovesTheGroup() {
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1), body(2)));
    List<Message> got = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(10).pop();
    queen.ack(got);
    assertThat(queen.queue(q).group("g").seekToBeginning()).isEqualTo(1);
    assertThat(queen.queue(q).group("g").batch(10).pop()).hasSize(3);
    queen.queue(q).group("g").seekToEnd();
    assertThat(queen.queue(q).group("g").batch(10).pop()).isEmpty();
  }

  @Test
  void seekRefusesAGroupOrQueueThatDoesNotExistAndCreatesNothing() throws Exception {
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    queen.ack(queen.queue(q).group("billing").subscription(SubscriptionMode.ALL).batch(10).pop());

    assertThatThrownBy(() -> queen.queue(q).group("biling").seekToBeginning())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("group 'biling' has never consumed queue '" + q + "'")
        .hasMessageContaining("its groups: billing")
        .hasMessageContaining("subscription(...)");
    assertThatThrownBy(() -> queen.queue(q + "-typo").group("billing").seek(Instant.now()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("queue '" + q + "-typo' does not exist");
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
         ResultSet rs = st.executeQuery("select count(*) from queen.consumer_groups where name = 'biling'")) {
      rs.next();
      assertThat(rs.getInt(1)).isZero();
    }
    // the group that exists is still moved, and keeps its place
    assertThat(queen.queue(q).group("billing").seekToBeginning()).isEqualTo(1);
    assertThat(queen.queue(q).group("billing").batch(10).pop()).hasSize(2);
  }

  /** A misspelt group's redriveAll said 0, read as "the dead-letter queue is empty"; list and count stay lenient. */
  @Test
  void redriveAllAndPurgeRefuseAGroupOrQueueThatDoesNotExist() {
    queen.queue(q).partition("p").push(body(0));
    queen.ack(queen.queue(q).group("billing").subscription(SubscriptionMode.ALL).batch(10).pop());
    assertThatThrownBy(() -> queen.deadLetters(q).group("biling").redriveAll())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("redriveAll: group 'biling' has never consumed queue '" + q + "' (its groups: billing)");
    assertThatThrownBy(() -> queen.deadLetters(q + "-typo").group("billing").purge())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("purge: queue '" + q + "-typo' does not exist");
    assertThat(queen.deadLetters(q).group("biling").count()).isZero();
    assertThat(queen.deadLetters(q).group("billing").redriveAll()).isZero();
    assertThat(queen.deadLetters(q).group("billing").purge()).isZero();
    assertThat(queen.deadLetters(q).defaultGroup().redriveAll()).isZero();
  }

  @Test
  void autoAckMovesTheCursorOnDelivery() {
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    List<Message> got = queen.queue(q).consumer().batch(1).autoAck(true).pop();
    assertThat(got.get(0).leaseId()).isNull();
    assertThat(queen.ack(got.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
    assertThat(queen.queue(q).consumer().batch(10).pop()).extracting(Message::offset).containsExactly(1L);
  }

  @Test
  void waitingPopWakesOnPush() throws Exception {
    CompletableFuture<List<Message>> waiting = CompletableFuture.supplyAsync(
        () -> queen.queue(q).consumer().waitFor(Duration.ofSeconds(20)).pop());
    // the pop is waiting: no answer for a while, then the push wakes it
    await().during(Duration.ofMillis(200)).atMost(Duration.ofSeconds(2)).until(() -> !waiting.isDone());
    long t0 = System.nanoTime();
    queen.queue(q).partition("p").push(body(0));
    List<Message> got = waiting.get(10, TimeUnit.SECONDS);
    assertThat(got).hasSize(1);
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(5));
  }

  @Test
  void renewExtendsTheLease() throws Exception {
    queen.queue(q).partition("p").push(body(0));
    Message m = queen.queue(q).consumer().leaseTime(Duration.ofMillis(600)).pop().get(0);
    // renewed every 300 ms, the 600 ms lease stays held for twice its length
    await().during(Duration.ofMillis(1200)).atMost(Duration.ofSeconds(5)).pollInterval(Duration.ofMillis(300))
        .until(() -> queen.renew(m));
    assertThat(queen.ack(m).outcome()).isEqualTo(AckOutcome.ACKED);
  }

  @Test
  void deadLettersCanBeRedrivenForTheirGroupAndPurged() {
    queen.queue(q).configure(c -> c.retryLimit(0));
    queen.queue(q).partition("p").pushAll(List.of(body(0), body(1)));
    Message m = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).pop().get(0);
    queen.ack(m, AckStatus.FAILED, "bad");
    queen.ack(queen.queue(q).group("g").pop());
    assertThat(queen.queue(q).group("g").pop()).isEmpty();

    var dls = queen.deadLetters(q).group("g");
    var row = dls.list(10, null).get(0);
    assertThat(dls.redrive(row)).isTrue();
    assertThat(dls.count()).isZero();
    List<Message> again = queen.queue(q).group("g").pop();
    assertThat(again).extracting(Message::offset).containsExactly(0L);
    assertThat(queen.ack(again.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
    assertThat(queen.queue(q).group("g").pop()).isEmpty();
    // other groups are not affected by a redrive
    assertThat(queen.queue(q).group("other").pop()).isEmpty();

    Message m2 = null;
    queen.queue(q).partition("p").push(body(2));
    m2 = queen.queue(q).group("g").pop().get(0);
    queen.ack(m2, AckStatus.DEAD_LETTER, "bad again");
    assertThat(dls.purge()).isEqualTo(1);
    assertThat(dls.count()).isZero();
  }

  @Test
  void badInputFailsFastNamingTheField() {
    assertThatThrownBy(() -> queen.queue("bad name!")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("queue name").hasMessageContaining("[A-Za-z0-9._-]{1,128}");
    assertThatThrownBy(() -> queen.queue(q).partition("x".repeat(129)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("partition name");
    assertThatThrownBy(() -> queen.queue(q).push(List.of())).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("empty");
    assertThatThrownBy(() -> queen.queue(q).push(Json.of("{not json")))
        .isInstanceOf(PayloadSerializationException.class).hasMessageContaining("items[0].payload");
    assertThatThrownBy(() -> queen.queue(q).consumer().waitFor(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("waitFor");
    assertThatThrownBy(() -> queen.queue(q).consumer().batch(0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("batch");
    assertThatThrownBy(() -> queen.queue(q).group("__mine")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("reserved");
    assertThatThrownBy(() -> queen.queue(q).configure(c -> c.retryLimit(-1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("retryLimit");
    assertThatThrownBy(() -> queen.queue(q).configure(c -> c.leaseTime(Duration.ZERO)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("leaseTime");
    // nothing was created by the failed calls
    assertThat(queen.status().queue(q)).isNull();
  }

  @Test
  void aCollectionPushedAsOnePayloadIsRefused() {
    String q = "one-payload";
    assertThatThrownBy(() -> queen.queue(q).push(List.of(Map.of("a", 1), Map.of("a", 2))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("push(List<PushItem>)");
    assertThatThrownBy(() -> queen.queue(q).partition("p").push(new int[] {1, 2}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pushAll");
    assertThat(queen.queue(q).consumer().pop()).isEmpty();
    // a PushItem given to the one-payload push is pushed as the item it is
    queen.queue(q).push((Object) PushItem.of("p", Map.of("a", 3)).transactionId("t-3"));
    assertThat(queen.queue(q).consumer().pop()).singleElement().satisfies(m -> {
      assertThat(m.partition()).isEqualTo("p");
      assertThat(m.transactionId()).isEqualTo("t-3");
    });
  }

  record Typed(long amountCents) {}

  @Test
  void aPayloadThatDoesNotFitItsTypeNamesThePathNotTheValue() {
    String q = "typed";
    queen.queue(q).push(Map.of("amountCents", "SECRET-4111"));
    io.queen.Message m = queen.queue(q).consumer().pop().get(0);
    assertThatThrownBy(() -> m.payload(Typed.class)).isInstanceOf(io.queen.PayloadSerializationException.class)
        .hasMessageContaining("at 'amountCents'").hasMessageNotContaining("SECRET").hasNoCause();
  }
}
