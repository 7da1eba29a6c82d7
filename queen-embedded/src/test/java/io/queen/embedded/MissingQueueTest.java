package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Queen;
import io.queen.Subscription;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/** A pop or consume of a queue that does not exist creates nothing (a typo must not mint a queue). */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MissingQueueTest {
  private Queen queen;
  private String q;
  private DataSource ds;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("missing").pollInterval(Duration.ofMillis(50)).start();
    q = "q-" + info.getTestMethod().orElseThrow().getName();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  @Test
  void aPopOfAMissingQueueCreatesNothing() throws Exception {
    String missing = "no-such-" + q;
    assertThat(queen.queue(missing).consumer().pop()).isEmpty();
    assertThat(queen.queue(missing).group("g").batch(5).partitions(3).pop()).isEmpty();
    assertThat(queen.queue(missing).group("g").partition("p").pop()).isEmpty();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select (select count(*) from queen.queues where name = '" + missing + "'),"
            + " (select count(*) from queen.consumer_groups g join queen.queues qq on qq.id = g.queue_id"
            + " where qq.name = '" + missing + "')")) {
      rs.next();
      assertThat(rs.getLong(1)).as("queues").isZero();
      assertThat(rs.getLong(2)).as("consumer groups").isZero();
    }
    assertThat(queen.status().queue(missing)).isNull();
  }

  @Test
  void aConsumerOfAMissingQueueWaitsAndThenReadsEverythingPushed() {
    List<Integer> seen = new CopyOnWriteArrayList<>();
    try (Subscription s = queen.queue(q).group("late-queue").consume(m -> seen.add(m.payload().get("n").asInt()))) {
      Awaitility.await().pollDelay(Duration.ofMillis(200)).until(() -> true);
      assertThat(s.queueMissing()).as("the subscription says its queue does not exist").isTrue();
      queen.queue(q).partition("p").push(Map.of("n", 1));
      queen.queue(q).partition("p").push(Map.of("n", 2));
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> seen.size() == 2);
      assertThat(s.queueMissing()).isFalse();
    }
    assertThat(seen).as("a group that subscribed before its queue existed gets its first messages").containsExactly(1, 2);
  }

  /** The queue created without a message (configure): the watch's check after an empty pop finds it. */
  @Test
  void aConsumerOfAMissingQueueSeesItCreatedWithoutAMessage() {
    try (Subscription s = queen.queue(q).group("g").consume(m -> { })) {
      assertThat(s.queueMissing()).isTrue();
      queen.queue(q).configure(c -> c.retryLimit(3));
      Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> !s.queueMissing());
    }
    try (Subscription s = queen.queue(q).group("g2").consume(m -> { })) {
      assertThat(s.queueMissing()).as("an existing queue").isFalse();
    }
  }
}
