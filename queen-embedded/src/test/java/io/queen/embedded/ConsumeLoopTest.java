package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ConsumeLoopTest {
  private Queen queen;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("c1").pollInterval(Duration.ofMillis(200)).start();
    q = "c-" + info.getTestMethod().orElseThrow().getName();
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

  @Test
  void handlerReturningNormallyAcknowledges() {
    pushN(4, 25);
    Map<String, Integer> lastSeen = new ConcurrentHashMap<>();
    AtomicInteger outOfOrder = new AtomicInteger();
    try (Subscription s = queen.queue(q).group("g").subscription(io.queen.SubscriptionMode.ALL).concurrency(3).batch(10)
        .partitions(2).consume(m -> {
          int i = m.payload().get("i").asInt();
          Integer prev = lastSeen.put(m.partition(), i);
          if (prev != null && prev + 1 != i) {
            outOfOrder.incrementAndGet();
          }
        })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.handled() == 100);
      assertThat(s.failed()).isZero();
    }
    assertThat(outOfOrder).hasValue(0);
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
    assertThat(Thread.getAllStackTraces().keySet()).noneMatch(t -> t.getName().startsWith("queen-c1-" + q));
  }

  @Test
  void handlerExceptionRetriesThenDeadLetters() {
    queen.queue(q).configure(c -> c.retryLimit(2));
    pushN(1, 3);
    List<Integer> attemptsOfPoison = Collections.synchronizedList(new ArrayList<>());
    List<Integer> done = Collections.synchronizedList(new ArrayList<>());
    try (Subscription s = queen.queue(q).consumer().batch(10).consume(m -> {
      if (m.payload().get("i").asInt() == 1) {
        attemptsOfPoison.add(m.attempt());
        throw new IllegalStateException("cannot handle " + m.offset());
      }
      done.add(m.payload().get("i").asInt());
    })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> done.size() == 2);
      assertThat(s.failed()).isEqualTo(3);
    }
    assertThat(attemptsOfPoison).containsExactly(1, 2, 3);
    assertThat(done).containsExactly(0, 2);
    var dl = queen.deadLetters(q).defaultGroup().list(10, null);
    assertThat(dl).singleElement().satisfies(d -> {
      assertThat(d.offset()).isEqualTo(1);
      assertThat(d.error()).isEqualTo("cannot handle 1");
    });
  }

  @Test
  void batchHandlerGetsTheBatchAndFailureRedeliversIt() {
    pushN(2, 5);
    AtomicInteger calls = new AtomicInteger();
    List<Integer> sizes = Collections.synchronizedList(new ArrayList<>());
    try (Subscription s = queen.queue(q).consumer().batch(10).partitions(2).consumeBatch(batch -> {
      sizes.add(batch.size());
      if (calls.incrementAndGet() == 1) {
        throw new RuntimeException("first batch fails");
      }
    })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.handled() == 10);
    }
    assertThat(sizes.get(0)).isEqualTo(10);
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
  }

  @Test
  void leaseIsRenewedWhileAHandlerRunsLongerThanTheLease() {
    queen.queue(q).configure(c -> c.leaseTime(Duration.ofMillis(600)));
    pushN(1, 1);
    AtomicInteger calls = new AtomicInteger();
    try (Subscription s = queen.queue(q).consumer().consume(m -> {
      calls.incrementAndGet();
      Thread.sleep(2000); // three lease times
    })) {
      await().atMost(Duration.ofSeconds(20)).until(() -> s.handled() == 1);
      // nobody else got the partition while the handler ran, and the ack was accepted
      assertThat(queen.queue(q).consumer().pop()).isEmpty();
    }
    assertThat(calls).hasValue(1);
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
  }

  @Test
  void closeStopsWorkersAndReleasesLeases() throws Exception {
    pushN(1, 3);
    AtomicInteger started = new AtomicInteger();
    Subscription s = queen.queue(q).consumer().leaseTime(Duration.ofSeconds(60)).gracePeriod(Duration.ofMillis(200))
        .consume(m -> {
          started.incrementAndGet();
          new java.util.concurrent.CountDownLatch(1).await(); // stuck until close interrupts it
        });
    await().atMost(Duration.ofSeconds(10)).until(() -> started.get() == 1);
    long t0 = System.nanoTime();
    s.close();
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(5));
    assertThat(s.isRunning()).isFalse();
    // the lease was given back: the message is available at once, not after 60 s, and not counted as a failure
    List<Message> again = queen.queue(q).consumer().pop();
    assertThat(again).hasSize(1);
    assertThat(again.get(0).attempt()).isEqualTo(1);
    queen.ack(again);
  }

  @Test
  void closedQueenRefusesWork() {
    queen.close();
    assertThatThrownBy(() -> queen.queue(q).push(Map.of())).isInstanceOf(io.queen.BrokerClosedException.class);
    queen.close(); // idempotent
  }

  @Test
  void pushOnlyProcessStartsNoConsumerThreads() {
    queen.queue(q).push(Map.of("x", 1));
    assertThat(Thread.getAllStackTraces().keySet()).noneMatch(t -> t.getName().startsWith("queen-c1-" + q));
  }
}
