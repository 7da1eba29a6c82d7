package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.QueueConfig;
import io.queen.RetentionRun;
import io.queen.Status;
import io.queen.SubscriptionMode;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Retention: the janitor removes old messages only once every
 * group's cursor has passed them, unless {@code allowDropPastCommitted}; driven by {@link Queen#runRetentionNow()}
 * over rows backdated by SQL, never by waiting.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RetentionTest {

  static void backdate(DataSource ds, String queue, Duration by) throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("update queen.messages m"
        + " set created_at = m.created_at - ?::interval from queen.partitions p join queen.queues q on q.id = p.queue_id"
        + " where m.partition_id = p.id and q.name = ?")) {
      st.setString(1, by.toSeconds() + " seconds");
      st.setString(2, queue);
      st.executeUpdate();
    }
  }

  static List<Long> offsets(DataSource ds, String queue) throws Exception {
    List<Long> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.\"offset\""
        + " from queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues q on q.id = p.queue_id"
        + " where q.name = ? order by p.name, m.\"offset\"")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getLong(1));
        }
      }
    }
    return out;
  }

  static long count(DataSource ds, String sql) throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(sql);
        ResultSet rs = st.executeQuery()) {
      rs.next();
      return rs.getLong(1);
    }
  }

  static List<Message> popAndAck(Queen queen, String queue, String group, int n) {
    List<Message> got = queen.queue(queue).group(group).subscription(SubscriptionMode.ALL).batch(n).pop();
    assertThat(queen.ack(got)).allSatisfy(r -> assertThat(r.success()).isTrue());
    return got;
  }

  @Test
  void theSeedsExample(DataSource ds) throws Exception {
    // payments.requested keeps messages 30 days; messages 1-4 are 31 days old; charge-cards has recorded completion
    // through message 4, audit-payments only through message 2
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      String q = "payments.requested";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(30)));
      for (int i = 1; i <= 4; i++) {
        queen.queue(q).push(Map.of("order_id", "order-10" + i));
      }
      assertThat(popAndAck(queen, q, "charge-cards", 4)).hasSize(4);
      assertThat(popAndAck(queen, q, "audit-payments", 2)).hasSize(2);
      backdate(ds, q, Duration.ofDays(31));

      // the janitor's next pass: messages 1-2 go (both groups passed them, older than retention); 3-4 stay, held
      // back by the audit group's cursor at 2 despite their age
      RetentionRun run = queen.runRetentionNow();
      assertThat(run.ran()).isTrue();
      assertThat(run.removed()).isEqualTo(2);
      assertThat(run.lost()).isZero();
      assertThat(offsets(ds, q)).containsExactly(2L, 3L);
      Status.RetentionStatus r = queen.status().queue(q).retention();
      assertThat(r.heldBy()).isEqualTo("audit-payments");
      assertThat(r.oldestOffset()).isEqualTo(2L);
      assertThat(r.oldestPartition()).isEqualTo("Default");
      assertThat(queen.status().queue(q).messages()).isEqualTo(2);

      // once the audit group finishes messages 3-4, they become eligible too
      List<Message> rest = popAndAck(queen, q, "audit-payments", 10);
      assertThat(rest).extracting(m -> m.payload().get("order_id").asText()).containsExactly("order-103", "order-104");
      assertThat(queen.runRetentionNow().removed()).isEqualTo(2);
      assertThat(offsets(ds, q)).isEmpty();
      assertThat(queen.status().queue(q).retention().heldBy()).isNull();
      assertThat(queen.status().queue(q).retention().oldestKeptAt()).isNull();

      // the log goes on at the next offset; both groups get the new message
      queen.queue(q).push(Map.of("order_id", "order-105"));
      assertThat(popAndAck(queen, q, "charge-cards", 10)).extracting(Message::offset).containsExactly(4L);
      assertThat(popAndAck(queen, q, "audit-payments", 10)).extracting(Message::offset).containsExactly(4L);
    }
  }

  @Test
  void youngMessagesAndQueuesWithoutRetentionAreKept(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      queen.queue("young").configure(c -> c.retention(Duration.ofDays(30)));
      queen.queue("forever").configure(c -> c);
      for (String q : List.of("young", "forever")) {
        queen.queue(q).push(Map.of("i", 1));
        popAndAck(queen, q, "g", 10);
      }
      backdate(ds, "young", Duration.ofDays(29));
      backdate(ds, "forever", Duration.ofDays(3000));
      assertThat(queen.runRetentionNow().removed()).isZero();
      assertThat(offsets(ds, "young")).containsExactly(0L);
      assertThat(offsets(ds, "forever")).containsExactly(0L);
      assertThat(queen.status().queue("young").retention().heldBy()).isNull();
      assertThat(queen.status().queue("forever").retention()).isNull();
    }
  }

  @Test
  void completedRetentionRemovesWhatEveryGroupPassedBeforeRetention(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      String q = "done";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(30)).completedRetention(Duration.ofHours(1)));
      queen.queue(q).partition("Default").pushAll(List.of(Map.of("i", 1), Map.of("i", 2), Map.of("i", 3)));
      popAndAck(queen, q, "a", 10);
      popAndAck(queen, q, "b", 1);
      backdate(ds, q, Duration.ofHours(2));
      // two hours old: 0 was passed by both groups and goes; 1 and 2 wait for b (or for 30 days)
      assertThat(queen.runRetentionNow().removed()).isEqualTo(1);
      assertThat(offsets(ds, q)).containsExactly(1L, 2L);
      assertThat(queen.status().queue(q).retention().heldBy()).isEqualTo("b"); // old enough for completedRetention
    }
  }

  @Test
  void allowDropPastCommittedLetsAgeWinAndCountsTheLoss(DataSource ds) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).meterRegistry(registry).start();
        LogCapture logs = LogCapture.start()) {
      String q = "lossy";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(7)).allowDropPastCommitted(true).retryLimit(0));
      queen.queue(q).partition("a").pushAll(List.of(Map.of("i", 0), Map.of("i", 1), Map.of("i", 2), Map.of("i", 3)));
      queen.queue(q).partition("b").pushAll(List.of(Map.of("i", 0), Map.of("i", 1)));
      // fast reads everything; slow dead-letters the head of a and consumes nothing else
      for (int i = 0; i < 2; i++) {
        popAndAck(queen, q, "fast", 10);
      }
      List<Message> head = queen.queue(q).group("slow").subscription(SubscriptionMode.ALL).partition("a").batch(1).pop();
      assertThat(queen.ack(head, AckStatus.FAILED, "boom").get(0).success()).isTrue();
      assertThat(count(ds, "select count(*) from queen.dead_letters")).isEqualTo(1);
      backdate(ds, q, Duration.ofDays(8));
      queen.queue(q).partition("a").push(Map.of("i", 4)); // young: kept

      RetentionRun run = queen.runRetentionNow();
      assertThat(run.removed()).isEqualTo(6);
      assertThat(run.lost()).isEqualTo(3 + 2); // slow had passed offset 0 of a (dead-lettered) only
      assertThat(offsets(ds, q)).containsExactly(4L);
      assertThat(count(ds, "select count(*) from queen.dead_letters")).isZero(); // followed its message

      Status.GroupStatus slow = queen.status().queue(q).group("slow");
      assertThat(slow.lostMessages()).isEqualTo(5);
      assertThat(slow.losses()).extracting(Status.Loss::partition, Status.Loss::messages, Status.Loss::upToOffset)
          .containsExactlyInAnyOrder(org.assertj.core.groups.Tuple.tuple("a", 3L, 3L),
              org.assertj.core.groups.Tuple.tuple("b", 2L, 1L));
      assertThat(queen.status().queue(q).group("fast").lostMessages()).isZero();
      assertThat(registry.get("queen.retention.lost").tag("queue", q).tag("group", "slow").counter().count())
          .isEqualTo(5);
      assertThat(registry.get("queen.retention.removed").tag("queue", q).counter().count()).isEqualTo(6);
      assertThat(logs.linesWith("WARN", "group 'slow' had not consumed", "5 message(s)", "queue 'lossy'")).hasSize(1);

      // the slow group resumes at the oldest kept message: no error, nothing redelivered twice, the gap was reported
      List<Message> next = queen.queue(q).group("slow").batch(10).pop();
      assertThat(next).extracting(Message::partition, Message::offset)
          .containsExactly(org.assertj.core.groups.Tuple.tuple("a", 4L));
      assertThat(queen.ack(next).get(0).success()).isTrue();
      assertThat(queen.queue(q).group("slow").batch(10).pop()).isEmpty();
      assertThat(queen.status().queue(q).group("slow").lag()).isZero();

      // a group subscribed with ALL after the drop starts at the oldest kept message
      assertThat(queen.queue(q).group("late").subscription(SubscriptionMode.ALL).batch(10).pop())
          .extracting(Message::offset).containsExactly(4L);
    }
  }

  @Test
  void aLiveLeaseIsNeverRemovedUnderItsConsumer(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      String q = "leased";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(1)).allowDropPastCommitted(true));
      queen.queue(q).partition("Default").pushAll(List.of(Map.of("i", 0), Map.of("i", 1), Map.of("i", 2)));
      List<Message> held = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(2).pop();
      backdate(ds, q, Duration.ofDays(2));
      assertThat(queen.runRetentionNow().removed()).isZero(); // offsets 0-1 are leased, 2 is behind them
      assertThat(queen.status().queue(q).retention().heldBy()).isEqualTo("g");
      assertThat(queen.ack(held)).allSatisfy(r -> assertThat(r.success()).isTrue());
      assertThat(queen.runRetentionNow().removed()).isEqualTo(3);
      assertThat(queen.runRetentionNow().lost()).isZero();
    }
  }

  @Test
  void optionsAreValidatedAndNothingIsStoredOnError(DataSource ds) {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      queen.queue("v").configure(c -> c.retention(Duration.ofDays(30)).pendingAlertAfter(Duration.ofDays(1)));
      assertThatThrownBy(() -> queen.queue("v").configure(c -> c.pendingAlertAfter(Duration.ofDays(30))))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("pendingAlertAfter must be shorter than retention (PT720H), was PT720H");
      assertThatThrownBy(() -> queen.queue("v").configure(c -> c.completedRetention(Duration.ofDays(31))))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("completedRetention must be shorter than retention");
      assertThatThrownBy(() -> queen.queue("w").configure(c -> c.allowDropPastCommitted(true)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("allowDropPastCommitted needs retention");
      assertThatThrownBy(() -> queen.queue("w").configure(c -> c.retention(Duration.ofMillis(10))))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("retention must be 0 (off) or between PT1S and PT87600H, was PT0.01S");
      // every problem of one call at once, as the node's builder reports them
      assertThatThrownBy(() -> queen.queue("w").configure(c -> c.retryLimit(-1).leaseTime(Duration.ZERO)))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage("2 invalid options: leaseTime must be between PT0.1S and PT24H, was PT0S;"
              + " retryLimit must be 0..1000, was -1");
      assertThat(queen.queue("v").config().pendingAlertAfter()).isEqualTo(Duration.ofDays(1));
      assertThat(queen.queue("v").config().retention()).isEqualTo(Duration.ofDays(30));
      assertThat(queen.status().queue("w")).isNull();
    }
  }

  @Test
  void underConcurrentPushAndConsumeNothingAGroupStillNeedsIsRemoved(DataSource ds) throws Exception {
    int perPusher = 1_000;
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      String q = "busy";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(1)));
      java.util.Set<String> fast = java.util.concurrent.ConcurrentHashMap.newKeySet();
      java.util.Set<String> slow = java.util.concurrent.ConcurrentHashMap.newKeySet();
      java.util.concurrent.atomic.AtomicBoolean pushing = new java.util.concurrent.atomic.AtomicBoolean(true);
      java.util.concurrent.atomic.AtomicLong removed = new java.util.concurrent.atomic.AtomicLong();
      try (io.queen.Subscription f = queen.queue(q).group("fast").subscription(SubscriptionMode.ALL).batch(20)
              .consume(m -> fast.add(m.partition() + "/" + m.offset()));
          io.queen.Subscription s = queen.queue(q).group("slow").subscription(SubscriptionMode.ALL).batch(5)
              .consume(m -> {
                slow.add(m.partition() + "/" + m.offset());
                Thread.sleep(1);
              })) {
        Thread janitor = new Thread(() -> {
          try {
            while (pushing.get() || slow.size() < 2 * perPusher) {
              backdate(ds, q, Duration.ofDays(2)); // everything stored is past retention at every pass
              removed.addAndGet(queen.runRetentionNow().removed());
            }
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        });
        janitor.start();
        List<Thread> pushers = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
          int id = t;
          Thread p = new Thread(() -> {
            for (int i = 0; i < perPusher; i += 20) {
              List<Map<String, Integer>> batch = new ArrayList<>();
              for (int j = 0; j < 20; j++) {
                batch.add(Map.of("t", id, "i", i + j));
              }
              queen.queue(q).partition("p" + ((i / 20) % 4)).pushAll(batch);
            }
          });
          p.start();
          pushers.add(p);
        }
        for (Thread p : pushers) {
          p.join();
        }
        pushing.set(false);
        org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(40))
            .until(() -> fast.size() == 2 * perPusher && slow.size() == 2 * perPusher);
        janitor.join(10_000);
      }
      // every message reached both groups (none was removed before the slower one had it), and all of it went
      assertThat(fast).hasSize(2 * perPusher);
      assertThat(slow).isEqualTo(fast);
      backdate(ds, q, Duration.ofDays(2));
      removed.addAndGet(queen.runRetentionNow().removed());
      assertThat(removed.get()).isEqualTo(2 * perPusher);
      assertThat(offsets(ds, q)).isEmpty();
      assertThat(queen.status().queue(q).group("slow").lostMessages()).isZero();
    }
  }
}
