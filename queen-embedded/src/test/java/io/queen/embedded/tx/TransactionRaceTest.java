package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.AckStatus;
import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/** Bundles racing each other, and the charge-once shape under redelivery. */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TransactionRaceTest {
  private static final KvOptions DAY = Kv.ttl(Duration.ofDays(1));
  private DataSource ds;
  private Queen queen;
  private String q;
  private String ns;
  private ExecutorService pool;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("tx3").start();
    String name = info.getTestMethod().orElseThrow().getName();
    q = "q-" + name;
    ns = "ns." + name;
    pool = Executors.newFixedThreadPool(8);
  }

  @AfterEach
  void stop() throws InterruptedException {
    pool.shutdownNow();
    pool.awaitTermination(10, TimeUnit.SECONDS);
    queen.close();
  }

  @Test
  void twoBundlesRacingOnPutIfAbsentOneWinsTheOtherGetsTheWinnersValue() throws Exception {
    try (Connection a = ds.getConnection()) {
      a.setAutoCommit(false);
      CommitResult first = queen.transaction()
          .putIfAbsent(ns, "charge:1", Map.of("id", "ch_A"), DAY.required())
          .push(q, "1", Map.of("by", "A"))
          .commit(a);
      assertThat(first.success()).isTrue();

      // B runs while A holds the key uncommitted: B waits on the row, then sees A's commit
      CompletableFuture<CommitResult> second = CompletableFuture.supplyAsync(() -> queen.transaction()
          .putIfAbsent(ns, "charge:1", Map.of("id", "ch_B"), DAY.required())
          .push(q, "1", Map.of("by", "B"))
          .commit(), pool);
      Thread.sleep(300);
      assertThat(second).as("B is blocked behind A's uncommitted marker").isNotDone();
      a.commit();
      a.setAutoCommit(true);

      CommitResult b = second.get(30, TimeUnit.SECONDS);
      assertThat(b.success()).isFalse();
      assertThat(b.reason()).isEqualTo(CommitResult.Reason.KV_PRECONDITION);
      assertThat(b.value().get("id").asText()).isEqualTo("ch_A");
      assertThat(b.version()).as("the winner's version").isEqualTo(first.writes().get(0).version());
    }
    List<Message> pushed = queen.queue(q).consumer().batch(10).pop();
    assertThat(pushed).extracting(m -> m.payload().get("by").asText()).containsExactly("A");
  }

  @Test
  void manyBundlesRacingOnOneMarkerHaveExactlyOneWinner() throws Exception {
    for (int round = 0; round < 10; round++) {
      String key = "marker:" + round;
      CountDownLatch go = new CountDownLatch(1);
      List<Future<CommitResult>> fs = new ArrayList<>();
      for (int t = 0; t < 6; t++) {
        int id = t;
        fs.add(pool.submit(() -> {
          go.await();
          return queen.transaction().putIfAbsent(ns, key, "w" + id, DAY.required()).push(q, key, Map.of("w", id))
              .commit();
        }));
      }
      go.countDown();
      List<CommitResult> rs = new ArrayList<>();
      for (Future<CommitResult> f : fs) {
        rs.add(f.get(30, TimeUnit.SECONDS));
      }
      assertThat(rs).filteredOn(CommitResult::success).hasSize(1);
      String winner = queen.kv().get(ns, key).value().asText();
      assertThat(rs).filteredOn(r -> !r.success()).allSatisfy(r -> {
        assertThat(r.reason()).isEqualTo(CommitResult.Reason.KV_PRECONDITION);
        assertThat(r.value().asText()).isEqualTo(winner);
      });
    }
    assertThat(queen.queue(q).consumer().batch(100).partitions(100).pop()).as("one push per winner").hasSize(10);
  }

  /**
   * The transactional handler's shape: marker + effect row + ack in one commit, while consumers crash before or after the
   * external effect and leases expire. In the end every message has exactly one marker and exactly one
   * effect row, and the queue is empty. The external effect itself may repeat: that is the negative
   * half of the guarantee, and the test counts it instead of hiding it.
   */
  @Test
  void exactlyOneMarkerAndOneEffectRowUnderRedelivery() throws Exception {
    int messages = 60;
    queen.queue(q).configure(b -> b.retryLimit(1000).leaseTime(Duration.ofMillis(300)));
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table charges (order_id int not null, charge_id text not null)");
    }
    for (int i = 0; i < messages; i++) {
      queen.queue(q).partition("p" + (i % 7)).push(Map.of("order", i));
    }
    Map<Integer, AtomicInteger> externalCalls = new ConcurrentHashMap<>();
    AtomicInteger crashes = new AtomicInteger();
    AtomicInteger preconditionLost = new AtomicInteger();
    AtomicBoolean stop = new AtomicBoolean();
    List<Future<?>> workers = new ArrayList<>();
    for (int w = 0; w < 4; w++) {
      workers.add(pool.submit(() -> {
        while (!stop.get()) {
          List<Message> got = queen.queue(q).consumer().batch(1).waitFor(Duration.ofMillis(200)).pop();
          for (Message m : got) {
            int order = m.payload().get("order").asInt();
            int dice = ThreadLocalRandom.current().nextInt(10);
            if (dice == 0) {
              crashes.incrementAndGet(); // crash before the effect: the lease expires, redelivery
              continue;
            }
            externalCalls.computeIfAbsent(order, k -> new AtomicInteger()).incrementAndGet(); // chargeCard(order)
            if (dice == 1) {
              crashes.incrementAndGet(); // crash between the effect and the commit
              continue;
            }
            handle(m, order, preconditionLost);
          }
        }
        return null;
      }));
    }
    await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200))
        .until(() -> count("select count(distinct order_id) from charges") == messages && markers() == messages);
    stop.set(true);
    for (Future<?> f : workers) {
      f.get(30, TimeUnit.SECONDS);
    }
    // leases of crashed attempts expire; whatever comes back is a redelivery of finished work
    List<Message> late;
    do {
      late = queen.queue(q).consumer().batch(10).partitions(10).waitFor(Duration.ofMillis(800)).pop();
      for (Message m : late) {
        handle(m, m.payload().get("order").asInt(), preconditionLost);
      }
    } while (!late.isEmpty());

    assertThat(crashes.get()).as("the run did exercise redelivery").isPositive();
    assertThat(count("select count(*) from charges")).as("one effect row per message").isEqualTo(messages);
    assertThat(count("select count(distinct order_id) from charges")).isEqualTo(messages);
    assertThat(markers()).as("one marker per message").isEqualTo(messages);
    assertThat(queen.queue(q).consumer().batch(100).partitions(100).pop()).as("the queue is empty").isEmpty();
    assertThat(externalCalls.values().stream().mapToInt(AtomicInteger::get).sum())
        .as("the external effect may repeat after a crash between it and the commit").isGreaterThanOrEqualTo(messages);
  }

  private void handle(Message m, int order, AtomicInteger preconditionLost) throws SQLException {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      try (PreparedStatement st = c.prepareStatement("insert into charges(order_id, charge_id) values (?, ?)")) {
        st.setInt(1, order);
        st.setString(2, "ch_" + m.id());
        st.executeUpdate();
      }
      CommitResult res = queen.transaction()
          .once(ns, "charge:" + order, DAY.required())
          .ack(m)
          .commit(c);
      if (res.success()) {
        c.commit();
      } else {
        c.rollback();
        if (res.reason() == CommitResult.Reason.KV_PRECONDITION) {
          preconditionLost.incrementAndGet();
          queen.ack(m, AckStatus.COMPLETED, null); // done by someone else: take it off the cursor
        }
      }
      c.setAutoCommit(true);
    }
  }

  private long markers() throws SQLException {
    return count("select count(*) from queen.kv where namespace = '" + ns + "'");
  }

  private long count(String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
