package io.queen.embedded.internal.ops;

import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.FrozenHeartbeats;
import io.queen.embedded.internal.consume.ConsumerBuilderImpl;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A group whose consumer counts attempts itself (a sink) gets its expired leases released
 * by pop without an attempt and never dead-lettered; every other group keeps the core's rule. Such a
 * group's FAILED acks add attempts past the queue's retryLimit; only its DEAD_LETTER ack gives up.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GroupExpiryTest {
  private static final Duration SHORT = Duration.ofMillis(100);

  private static Queen node(DataSource ds, String id) {
    return EmbeddedQueen.builder().dataSource(ds).nodeId(id).sessionTimeout(Duration.ofSeconds(10)).listen(false).start();
  }

  private static boolean groupExpiry(DataSource ds, String queue, String group, boolean counts) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement st = c.prepareStatement("select queen.group_expiry(?, ?, 'ALL', null, ?)")) {
      st.setString(1, queue);
      st.setString(2, group);
      st.setBoolean(3, counts);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }

  /** The group's flag, or null when the group does not exist. */
  private static Boolean flag(DataSource ds, String queue, String group) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select g.expiry_counts"
        + " from queen.consumer_groups g join queen.queues q on q.id = g.queue_id where q.name = ? and g.name = ?")) {
      st.setString(1, queue);
      st.setString(2, group);
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() ? rs.getBoolean(1) : null;
      }
    }
  }

  private static long deadLetters(DataSource ds, String queue) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select count(*)"
        + " from queen.dead_letters d join queen.queues q on q.id = d.queue_id where q.name = ?")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  @Test
  void leasesOfAGroupThatCountsItselfExpireTenTimesAndNothingIsDeadLettered(DataSource ds) throws Exception {
    String q = "expiry-off";
    try (Queen a = node(ds, "expiry-off-a")) {
      a.queue(q).push(List.of(PushItem.of("p", Map.of("n", 0)), PushItem.of("p", Map.of("n", 1))));
      assertThat(a.queue(q).config().retryLimit()).isEqualTo(3);
      assertThat(groupExpiry(ds, q, "sinkish", false)).isTrue();
      assertThat(flag(ds, q, "sinkish")).isFalse();
      for (int i = 1; i <= 10; i++) {
        List<Message> got = a.queue(q).group("sinkish").batch(10).leaseTime(SHORT).pop();
        assertThat(got).as("round %d: the whole batch again, not the head alone", i).extracting(Message::offset)
            .containsExactly(0L, 1L);
        assertThat(got.get(0).attempt()).as("an expiry is not an attempt").isEqualTo(1);
        Thread.sleep(SHORT.toMillis() + 100); // never acked: the lease expires
      }
      // a node that stops heartbeating while it holds the lease: not an attempt either
      FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
      try (Queen victim = node(frozen, "expiry-off-victim")) {
        assertThat(victim.queue(q).group("sinkish").batch(10).leaseTime(Duration.ofMinutes(5)).pop()).hasSize(2);
        frozen.freeze(victim);
        try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
            "update queen.nodes set dead_after = clock_timestamp() - interval '1 second' where node_id = ?")) {
          st.setString(1, victim.nodeId());
          assertThat(st.executeUpdate()).isEqualTo(1);
        }
        List<Message> got = a.queue(q).group("sinkish").batch(10).pop();
        assertThat(got).extracting(Message::offset).containsExactly(0L, 1L);
        assertThat(got.get(0).attempt()).isEqualTo(1);
        assertThat(a.ack(got)).allMatch(AckResult::success);
      }
      assertThat(deadLetters(ds, q)).as("nothing dead-lettered after 11 lost leases with retryLimit 3").isZero();
      assertThat(a.queue(q).group("sinkish").pop()).isEmpty();
      // an explicit failure still counts for such a group: the connector's own dead-lettering is ack's business
      a.queue(q).push(List.of(PushItem.of("p", Map.of("n", 2))));
      List<Message> again = a.queue(q).group("sinkish").pop();
      a.ack(again, io.queen.AckStatus.FAILED, "handler said so");
      assertThat(a.queue(q).group("sinkish").pop()).extracting(Message::attempt).containsExactly(2);
    }
  }

  /** The cursor's head attempts of one partition for a group. */
  private static int headAttempts(DataSource ds, String queue, String group) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select cu.attempts"
        + " from queen.cursors cu join queen.queues q on q.id = cu.queue_id where q.name = ? and cu.group_name = ?")) {
      st.setString(1, queue);
      st.setString(2, group);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    }
  }

  @Test
  void failedAcksOfAGroupThatCountsItselfAddAttemptsPastRetryLimitAndOnlyDeadLetterGivesUp(DataSource ds)
      throws Exception {
    String q = "expiry-failed";
    try (Queen a = node(ds, "expiry-failed-a")) {
      a.queue(q).configure(b -> b.retryLimit(1));
      a.queue(q).push(List.of(PushItem.of("p", Map.of("n", 0)), PushItem.of("p", Map.of("n", 1))));
      assertThat(groupExpiry(ds, q, "sinkish", false)).isTrue();
      assertThat(groupExpiry(ds, q, "plain", true)).isTrue();
      // five FAILED acks of the head with retryLimit 1; each adds one attempt, none dead-letters
      for (int i = 1; i <= 5; i++) {
        List<Message> got = a.queue(q).group("sinkish").batch(10).pop();
        assertThat(got.get(0).offset()).isZero();
        assertThat(got.get(0).attempt()).isEqualTo(i);
        assertThat(a.ack(got.subList(0, 1), io.queen.AckStatus.FAILED, "refused")).extracting(AckResult::outcome)
            .containsExactly(io.queen.AckOutcome.RETRY_SCHEDULED);
        assertThat(headAttempts(ds, q, "sinkish")).isEqualTo(i);
      }
      assertThat(deadLetters(ds, q)).isZero();
      List<Message> last = a.queue(q).group("sinkish").batch(10).pop();
      assertThat(last).extracting(Message::offset).containsExactly(0L);
      assertThat(last.get(0).attempt()).isEqualTo(6);
      assertThat(a.ack(last, io.queen.AckStatus.DEAD_LETTER, "gave up")).extracting(AckResult::outcome)
          .containsExactly(io.queen.AckOutcome.DEAD_LETTERED);
      assertThat(deadLetters(ds, q)).isEqualTo(1);
      assertThat(a.queue(q).group("sinkish").batch(10).pop()).extracting(Message::offset).containsExactly(1L);
      // an ordinary group on the same queue: the second FAILED (attempts 2 > retryLimit 1) dead-letters, by the core's rule
      for (int i = 1; i <= 2; i++) {
        List<Message> got = a.queue(q).group("plain").batch(10).pop();
        assertThat(a.ack(got.subList(0, 1), io.queen.AckStatus.FAILED, "refused")).extracting(AckResult::outcome)
            .containsExactly(i == 1 ? io.queen.AckOutcome.RETRY_SCHEDULED : io.queen.AckOutcome.DEAD_LETTERED);
      }
      assertThat(deadLetters(ds, q)).isEqualTo(2);
    }
  }

  @Test
  void everyOtherGroupStillCountsAnExpiryAndDeadLettersPastRetryLimit(DataSource ds) throws Exception {
    String q = "expiry-on";
    try (Queen a = node(ds, "expiry-on-a")) {
      a.queue(q).push(List.of(PushItem.of("p", Map.of("n", 0)), PushItem.of("p", Map.of("n", 1))));
      assertThat(a.queue(q).group("plain").subscription(SubscriptionMode.ALL).batch(10).leaseTime(SHORT).pop())
          .hasSize(2);
      assertThat(flag(ds, q, "plain")).as("a group created by pop keeps the old rule").isTrue();
      Thread.sleep(SHORT.toMillis() + 100);
      for (int i = 2; i <= 4; i++) {
        List<Message> got = a.queue(q).group("plain").batch(10).leaseTime(SHORT).pop();
        assertThat(got).as("a head that failed comes alone").extracting(Message::offset).containsExactly(0L);
        assertThat(got.get(0).attempt()).isEqualTo(i);
        Thread.sleep(SHORT.toMillis() + 100);
      }
      List<Message> next = a.queue(q).group("plain").batch(10).pop();
      assertThat(next).as("1 + retryLimit expiries dead-letter the head").extracting(Message::offset).containsExactly(1L);
      assertThat(deadLetters(ds, q)).isEqualTo(1);
      // and setting the flag back to true restores exactly that rule
      assertThat(groupExpiry(ds, q, "plain", true)).isTrue();
      assertThat(flag(ds, q, "plain")).isTrue();
    }
  }

  @Test
  void theConnectorLoopSetsTheFlagBeforeItsFirstLeaseAndCreatesNothingForAMissingQueue(DataSource ds) throws Exception {
    String q = "expiry-loop";
    try (Queen a = node(ds, "expiry-loop-a")) {
      ConcurrentLinkedQueue<Long> seen = new ConcurrentLinkedQueue<>();
      ConsumerBuilderImpl b = (ConsumerBuilderImpl) a.queue(q).group("pg-x").subscription(SubscriptionMode.ALL);
      Subscription s = b.consumeOwned(batch -> {
        batch.forEach(m -> seen.add(m.offset()));
        a.ack(batch);
        return List.of();
      }, "pg-x", false);
      try {
        Thread.sleep(300);
        assertThat(groupExpiry(ds, q, "probe", false)).as("no queue yet: nothing is created").isFalse();
        assertThat(flag(ds, q, "pg-x")).isNull();
        a.queue(q).push(List.of(PushItem.of("p", Map.of("n", 0)), PushItem.of("p", Map.of("n", 1))));
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (seen.size() < 2 && System.nanoTime() < end) {
          Thread.sleep(50);
        }
        assertThat(seen).containsExactly(0L, 1L);
        assertThat(flag(ds, q, "pg-x")).isFalse();
      } finally {
        s.close();
      }
      ConsumerBuilderImpl plain = (ConsumerBuilderImpl) a.queue(q).group("pg-y").subscription(SubscriptionMode.ALL);
      Subscription t = plain.consumeOwned(batch -> {
        a.ack(batch);
        return List.of();
      }, "pg-y");
      try {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (flag(ds, q, "pg-y") == null && System.nanoTime() < end) {
          Thread.sleep(50);
        }
        assertThat(flag(ds, q, "pg-y")).as("the SPI's default keeps the core's rule").isTrue();
      } finally {
        t.close();
      }
    }
  }

  @Test
  void aConnectorLoopTakesOverTheLeasesOfADeadNodeMidBatchWithoutAnAttempt(DataSource ds) throws Exception {
    String q = "expiry-takeover";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    try (Queen a = node(frozen, "expiry-takeover-a"); Queen b = node(ds, "expiry-takeover-b")) {
      List<PushItem> items = new java.util.ArrayList<>();
      for (int i = 0; i < 40; i++) {
        items.add(PushItem.of("p" + i, Map.of("n", i)));
      }
      a.queue(q).push(items);
      java.util.concurrent.CountDownLatch stuck = new java.util.concurrent.CountDownLatch(1);
      ConsumerBuilderImpl ba = (ConsumerBuilderImpl) a.queue(q).group("pg-t").subscription(SubscriptionMode.ALL).batch(500)
          .concurrency(2);
      Subscription sa = ba.consumeOwned(batch -> {
        stuck.countDown();
        Thread.sleep(60_000);
        return List.of();
      }, "pg-t", false);
      assertThat(stuck.await(10, TimeUnit.SECONDS)).isTrue();
      frozen.freeze(a);
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
          "update queen.nodes set dead_after = clock_timestamp() - interval '1 second' where node_id = ?")) {
        st.setString(1, a.nodeId());
        assertThat(st.executeUpdate()).isEqualTo(1);
      }
      ConcurrentLinkedQueue<Message> seen = new ConcurrentLinkedQueue<>();
      ConsumerBuilderImpl bb = (ConsumerBuilderImpl) b.queue(q).group("pg-t").subscription(SubscriptionMode.ALL).batch(500)
          .concurrency(2);
      Subscription sb = bb.consumeOwned(batch -> {
        seen.addAll(batch);
        return batch; // acknowledged by the loop
      }, "pg-t", false);
      try {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (seen.size() < 40 && System.nanoTime() < end) {
          Thread.sleep(50);
        }
        assertThat(seen).hasSize(40);
        assertThat(seen).extracting(Message::attempt).containsOnly(1);
        assertThat(deadLetters(ds, q)).isZero();
      } finally {
        sb.close();
        sa.close(Duration.ofMillis(100));
      }
    }
  }
}
