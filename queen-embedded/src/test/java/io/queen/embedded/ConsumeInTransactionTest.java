package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * The consume loop's transactional handlers: the handler's effect, its once() marker and the ack commit
 * as one bundle; the loop never acks those messages a second time, treats an existing marker as "already
 * done", a lost lease as "another consumer has it", and an exception as a failure.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ConsumeInTransactionTest {
  private Queen queen;
  private DataSource ds;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("tx1").pollInterval(Duration.ofMillis(100)).start();
    q = "t-" + info.getTestMethod().orElseThrow().getName();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private void pushN(int partitions, int perPartition) {
    for (int p = 0; p < partitions; p++) {
      List<Object> payloads = new ArrayList<>();
      for (int i = 0; i < perPartition; i++) {
        payloads.add(Map.of("p", p, "i", i));
      }
      queen.queue(q).partition("p" + p).pushAll(payloads);
    }
  }

  private static String id(Message m) {
    return m.payload().get("p").asInt() + ":" + m.payload().get("i").asInt();
  }

  /** Messages in the effect queue, by the id they carry. */
  private Map<String, Integer> effects(String effectQueue) {
    Map<String, Integer> seen = new ConcurrentHashMap<>();
    while (true) {
      List<Message> got = queen.queue(effectQueue).consumer().batch(1000).partitions(100).autoAck(true).pop();
      if (got.isEmpty()) {
        return seen;
      }
      got.forEach(m -> seen.merge(m.payload().get("id").asText(), 1, Integer::sum));
    }
  }

  private long lag() {
    return queen.status().queue(q).groups().stream().filter(g -> g.name().equals("g")).findFirst().orElseThrow().lag();
  }

  @Test
  void effectMarkerAndAckCommitTogetherAndTheLoopDoesNotAckAgain() {
    pushN(4, 25);
    try (LogCapture logs = LogCapture.start();
        Subscription s = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).concurrency(3).batch(10)
            .partitions(2).consumeInTransaction((m, tx) -> tx
                .once("done", m.stateKey("done:" + m.offset()), Kv.ttl(Duration.ofHours(1)).required())
                .push(q + "-effects", m.partition(), Map.of("id", id(m))))) {
      await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 100);
      assertThat(s.failed()).isZero();
      assertThat(s.leaseLost()).isZero();
      assertThat(s.alreadyDone()).isZero();
      assertThat(lag()).isZero();
      assertThat(logs.linesWith("rejected")).isEmpty();
      assertThat(logs.linesWith("WARN")).isEmpty();
    }
    Map<String, Integer> effects = effects(q + "-effects");
    assertThat(effects).hasSize(100);
    assertThat(effects.values()).allMatch(n -> n == 1);
  }

  @Test
  void anExistingMarkerMeansAlreadyDone() {
    pushN(1, 10);
    // messages 0..4 were done before (by a consumer that crashed after its commit, say)
    for (int i = 0; i < 5; i++) {
      queen.kv().once("done", "@p/" + q + "/p0/g/done:" + i, Kv.ttl(Duration.ofHours(1)));
    }
    try (Subscription s = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(10)
        .consumeInTransaction((m, tx) -> tx
            .once("done", m.stateKey("done:" + m.offset()), Kv.ttl(Duration.ofHours(1)).required())
            .push(q + "-effects", "x", Map.of("id", id(m))))) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() + s.alreadyDone() == 10);
      assertThat(s.alreadyDone()).isEqualTo(5);
      assertThat(s.acked()).isEqualTo(5);
      assertThat(s.failed()).isZero();
      assertThat(lag()).isZero();
    }
    assertThat(effects(q + "-effects")).containsOnlyKeys("0:5", "0:6", "0:7", "0:8", "0:9");
  }

  @Test
  void aLostLeaseIsAnotherConsumersMessageNotAFailure() throws Exception {
    pushN(1, 3);
    AtomicBoolean once = new AtomicBoolean();
    List<String> handled = new ArrayList<>();
    try (Subscription s = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(3)
        .consumeInTransaction((m, tx) -> {
          synchronized (handled) {
            handled.add(id(m));
          }
          if (m.offset() == 1 && once.compareAndSet(false, true)) {
            // the lease goes away under the handler, as when it overran its lease and another consumer took the
            // partition (and then gave it up at once, so the test need not wait for that one's lease)
            try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
              st.executeUpdate("update queen.cursors set lease_id = gen_random_uuid(), lease_expires_at = now()"
                  + " where group_name = 'g' and lease_id = '" + m.leaseId() + "'");
            }
          }
          tx.once("done", m.stateKey("done:" + m.offset()), Kv.ttl(Duration.ofHours(1)).required())
              .push(q + "-effects", "x", Map.of("id", id(m)));
        })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 3);
      assertThat(s.leaseLost()).isEqualTo(1);
      assertThat(s.failed()).isZero();
      assertThat(lag()).isZero();
    }
    // message 1's first bundle rolled back with its lease; it was delivered again and applied once
    assertThat(handled).containsExactly("0:0", "0:1", "0:1", "0:2");
    assertThat(effects(q + "-effects")).containsOnlyKeys("0:0", "0:1", "0:2").allSatisfy((k, n) -> assertThat(n).isOne());
    // no failure was counted against the message for the lost bundle
    assertThat(queen.deadLetters(q).group("g").count()).isZero();
  }

  @Test
  void anExceptionFailsTheMessageAndNothingOfTheBundleApplies() {
    queen.queue(q).configure(c -> c.retryLimit(1));
    pushN(1, 3);
    AtomicInteger poisonCalls = new AtomicInteger();
    try (LogCapture logs = LogCapture.start();
        Subscription s = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(3)
            .consumeInTransaction((m, tx) -> {
              tx.once("done", m.stateKey("done:" + m.offset()), Kv.ttl(Duration.ofHours(1)).required())
                  .push(q + "-effects", "x", Map.of("id", id(m)));
              if (m.offset() == 1) {
                poisonCalls.incrementAndGet();
                throw new IllegalStateException("card declined");
              }
            })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 2 && s.deadLettered() == 1);
      assertThat(poisonCalls).hasValue(2);
      assertThat(s.failed()).isEqualTo(2);
      assertThat(lag()).isZero();
      // an operator sees each failure, and the dead-letter move with its place and error
      assertThat(logs.linesWith("WARN", "handler of queue '" + q + "' group 'g' failed on partition 'p0' offset 1"))
          .hasSize(2);
      assertThat(logs.linesWith("WARN", "dead-lettered queue '" + q + "' group 'g' partition 'p0' offset 1",
          "card declined")).hasSize(1);
    }
    assertThat(effects(q + "-effects")).containsOnlyKeys("0:0", "0:2");
    assertThat(queen.kv().get("done", "@p/" + q + "/p0/g/done:1").found()).isFalse();
  }

  @Test
  void batchFormCommitsOnceAndFallsBackToOneByOneWhenAMarkerExists() {
    pushN(2, 10);
    queen.kv().once("done", "@p/" + q + "/p1/g/done:3", Kv.ttl(Duration.ofHours(1)));
    List<Integer> batchSizes = new ArrayList<>();
    try (Subscription s = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(20).partitions(2)
        .consumeBatchInTransaction((batch, tx) -> {
          synchronized (batchSizes) {
            batchSizes.add(batch.size());
          }
          for (Message m : batch) {
            tx.once("done", m.stateKey("done:" + m.offset()), Kv.ttl(Duration.ofHours(1)).required())
                .push(q + "-effects", "x", Map.of("id", id(m)));
          }
        })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() + s.alreadyDone() == 20);
      assertThat(s.alreadyDone()).isEqualTo(1);
      assertThat(s.failed()).isZero();
      assertThat(lag()).isZero();
    }
    Map<String, Integer> effects = effects(q + "-effects");
    assertThat(effects).hasSize(19).doesNotContainKey("1:3");
    assertThat(effects.values()).allMatch(n -> n == 1);
    // the first call had the whole batch; after the marker was found, one message per call
    assertThat(batchSizes.get(0)).isEqualTo(20);
    assertThat(batchSizes.subList(1, batchSizes.size())).allMatch(n -> n == 1);
  }

  @Test
  void aHandlerCanDeadLetterAMessageAtOnce() {
    pushN(1, 3);
    List<String> plain = new ArrayList<>();
    try (Subscription s = queen.queue(q).group("plain").subscription(SubscriptionMode.ALL).batch(3).consume(m -> {
      if (m.offset() == 1) {
        throw new io.queen.DeadLetterException("amount is negative");
      }
      synchronized (plain) {
        plain.add(id(m));
      }
    })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 2 && s.deadLettered() == 1);
      assertThat(s.failed()).isZero();
    }
    assertThat(plain).containsExactly("0:0", "0:2");
    try (Subscription s = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(3)
        .consumeInTransaction((m, tx) -> {
          tx.push(q + "-effects", "x", Map.of("id", id(m)));
          if (m.offset() == 1) {
            throw new io.queen.DeadLetterException("amount is negative");
          }
        })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 2 && s.deadLettered() == 1);
      assertThat(s.failed()).isZero();
      assertThat(lag()).isZero();
    }
    assertThat(effects(q + "-effects")).containsOnlyKeys("0:0", "0:2");
    for (String group : List.of("plain", "g")) {
      List<io.queen.DeadLetter> dl = queen.deadLetters(q).group(group).list(10, null);
      assertThat(dl).singleElement().satisfies(d -> {
        assertThat(d.offset()).isEqualTo(1);
        assertThat(d.attempts()).isEqualTo(1); // at once: no retries spent
        assertThat(d.error()).isEqualTo("amount is negative");
      });
    }
  }

  @Test
  void aMarkerThatIsNotRequiredIsReportedToTheOperator() {
    pushN(1, 1);
    queen.kv().once("done", "@p/" + q + "/p0/g/done:0", Kv.ttl(Duration.ofHours(1)));
    try (LogCapture logs = LogCapture.start();
        Subscription s = queen.queue(q).group("g").subscription(SubscriptionMode.ALL)
            .consumeInTransaction((m, tx) -> tx.once("done", m.stateKey("done:" + m.offset()), Kv.ttl(Duration.ofHours(1)))
                .push(q + "-effects", "x", Map.of("id", id(m))))) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 1);
      assertThat(logs.linesWith("WARN", "mark the marker write required()")).hasSize(1);
    }
  }
}
