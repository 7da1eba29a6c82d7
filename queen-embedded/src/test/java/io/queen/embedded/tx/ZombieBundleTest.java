package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.FrozenHeartbeats;
import io.queen.embedded.LivenessTest;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A consumer that stalls past its lease (a long pause, a frozen host) while another takes the partition over and
 * finishes the message: when it goes on, its bundle's ack answers ALREADY_ACKED, and a bundle that pushes or writes
 * then applies nothing ({@code CommitResult.Reason.ALREADY_ACKED}), so the effect is never made twice. Under the
 * consumer's own live lease an ALREADY_ACKED (a message it acknowledged on its own before) stays a success. Through each
 * way a bundle reaches the database: the general path (a push), the KV-then-ack call ({@code bundle_kv_ack_fenced}), the
 * marker statement, and the consume loop. A bundle of acks alone, and a bundle that acks its own message twice, still
 * commit.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ZombieBundleTest {

  private static Queen node(DataSource ds, String id) {
    return EmbeddedQueen.builder().dataSource(ds).nodeId(id).listen(false).start();
  }

  /** The zombie's message, and the other node having taken it over (its lease expired) and finished it. */
  private static Message finishedByAnother(Queen zombie, Queen other, String q) {
    zombie.queue(q).partition("p").push(Map.of("n", 0));
    List<Message> got = zombie.queue(q).consumer().leaseTime(Duration.ofMillis(300)).pop();
    assertThat(got).hasSize(1);
    List<Message> again = new java.util.ArrayList<>();
    Awaitility.await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50)).until(() -> {
      again.addAll(other.queue(q).consumer().pop()); // once the zombie's lease has run out
      return !again.isEmpty();
    });
    assertThat(again).hasSize(1);
    assertThat(other.ack(again.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
    return got.get(0);
  }

  @Test
  void aPushAndTheAckOfAMessageAnotherConsumerFinishedApplyNothing(DataSource ds) throws Exception {
    try (Queen a = node(ds, "zombie-a"); Queen b = node(ds, "zombie-b")) {
      Message m = finishedByAnother(a, b, "zq1");
      CommitResult r = a.transaction().push("zq1-effects", "p", Map.of("from", "zombie")).ack(m).commit();
      assertThat(r.success()).isFalse();
      assertThat(r.reason()).isEqualTo(CommitResult.Reason.ALREADY_ACKED);
      assertThat(r.failedOperation()).isEqualTo(1);
      assertThat(r.acks()).extracting(AckResult::outcome).containsExactly(AckOutcome.ALREADY_ACKED);
      assertThat(count(ds, "zq1-effects")).as("the effect was not made a second time").isZero();
    }
  }

  @Test
  void aKvWriteAndTheAckOfAMessageAnotherConsumerFinishedApplyNothing(DataSource ds) throws Exception {
    try (Queen a = node(ds, "zombie-kv-a"); Queen b = node(ds, "zombie-kv-b")) {
      Message m = finishedByAnother(a, b, "zq2");
      CommitResult r = a.transaction().put("zstate", "total", Map.of("v", 1), Kv.forever()).ack(m).commit();
      assertThat(r.reason()).isEqualTo(CommitResult.Reason.ALREADY_ACKED);
      assertThat(a.kv().get("zstate", "total").found()).isFalse();
    }
  }

  @Test
  void aMarkerAndTheAckOfAMessageAnotherConsumerFinishedApplyNothing(DataSource ds) throws Exception {
    try (Queen a = node(ds, "zombie-marker-a"); Queen b = node(ds, "zombie-marker-b")) {
      Message m = finishedByAnother(a, b, "zq3");
      // a marker the other consumer did not write (its key is new): the marker statement's insert would succeed
      CommitResult r = a.transaction().once("zmarks", "zombie-only", Kv.ttl(Duration.ofHours(1)).required()).ack(m)
          .commit();
      assertThat(r.reason()).isEqualTo(CommitResult.Reason.ALREADY_ACKED);
      assertThat(a.kv().get("zmarks", "zombie-only").found()).isFalse();
    }
  }

  @Test
  void aJoinedTransactionThatOnlyAcksAMessageAnotherConsumerFinishedIsRefused(DataSource ds) throws Exception {
    try (Queen a = node(ds, "zombie-joined-a"); Queen b = node(ds, "zombie-joined-b")) {
      Message m = finishedByAnother(a, b, "zq9");
      try (Connection c = ds.getConnection()) {
        c.setAutoCommit(false);
        // the caller's own work is the effect: commit(Connection) counts it as one
        CommitResult r = a.transaction().ack(m).commit(c);
        assertThat(r.reason()).isEqualTo(CommitResult.Reason.ALREADY_ACKED);
        c.rollback();
      }
    }
  }

  @Test
  void acksAloneOfAFinishedMessageStillCommit(DataSource ds) throws Exception {
    try (Queen a = node(ds, "zombie-acks-a"); Queen b = node(ds, "zombie-acks-b")) {
      Message m = finishedByAnother(a, b, "zq4");
      CommitResult r = a.transaction().ack(m).commit();
      assertThat(r.success()).isTrue();
      assertThat(r.acks()).extracting(AckResult::outcome).containsExactly(AckOutcome.ALREADY_ACKED);
    }
  }

  @Test
  void aBundleThatAcksItsOwnMessageTwiceStillCommits(DataSource ds) throws Exception {
    try (Queen a = node(ds, "twice-a")) {
      a.queue("zq5").partition("p").push(Map.of("n", 0));
      Message m = a.queue("zq5").consumer().pop().get(0);
      // the second ack in a call of its own (a push between): it answers ALREADY_ACKED, the bundle's own doing
      CommitResult r = a.transaction().ack(m).push("zq5-effects", "p", Map.of("n", 0)).ack(m).commit();
      assertThat(r.success()).isTrue();
      assertThat(r.acks()).extracting(AckResult::outcome)
          .containsExactly(AckOutcome.ACKED, AckOutcome.ALREADY_ACKED);
      assertThat(count(ds, "zq5-effects")).isEqualTo(1);
      // and with a marker: the bundle goes the general way, which tells its own second ack apart
      a.queue("zq5").partition("p").push(Map.of("n", 1));
      Message n = a.queue("zq5").consumer().pop().get(0);
      assertThat(a.transaction().once("zmarks5", "n1", Kv.forever().required()).ack(n).ack(n).commit().success())
          .isTrue();
      assertThat(a.kv().get("zmarks5", "n1").found()).isTrue();
    }
  }

  @Test
  void anAckOfItsOwnEarlierAckUnderALiveLeaseStillCommits(DataSource ds) throws Exception {
    try (Queen a = node(ds, "own-a")) {
      a.queue("zq7").push(List.of(io.queen.PushItem.of("p", Map.of("n", 0)), io.queen.PushItem.of("p", Map.of("n", 1)),
          io.queen.PushItem.of("p", Map.of("n", 2))));
      List<Message> got = a.queue("zq7").consumer().batch(3).pop();
      assertThat(got).hasSize(3);
      // one message of the batch acknowledged on its own first (ahead of the head: the lease holds on), then the
      // batch's results and the whole batch's ack as one bundle
      assertThat(a.ack(got.get(1)).outcome()).isEqualTo(AckOutcome.ACKED);
      CommitResult r = a.transaction().push("zq7-effects", "p", Map.of("n", "results")).ack(got).commit();
      assertThat(r.success()).as("%s", r).isTrue();
      assertThat(r.acks()).extracting(AckResult::outcome)
          .containsExactly(AckOutcome.ACKED, AckOutcome.ALREADY_ACKED, AckOutcome.ACKED);
      assertThat(count(ds, "zq7-effects")).isEqualTo(1);

      // its head acknowledged on its own, the lease still holding the rest: the head's ack again in a bundle
      a.queue("zq7").push(List.of(io.queen.PushItem.of("p", Map.of("n", 3)), io.queen.PushItem.of("p", Map.of("n", 4))));
      List<Message> more = a.queue("zq7").consumer().batch(2).pop();
      assertThat(a.ack(more.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
      CommitResult again = a.transaction().put("zstate7", "k", Map.of("v", 1), Kv.forever()).ack(more.get(0)).commit();
      assertThat(again.success()).as("%s", again).isTrue();
      assertThat(a.kv().get("zstate7", "k").found()).isTrue();
    }
  }

  @Test
  void aBundleOverTwoPartitionsOneFinishedByAnotherAppliesNothingAndLeavesTheOtherToRedo(DataSource ds)
      throws Exception {
    try (Queen a = node(ds, "two-a"); Queen b = node(ds, "two-b")) {
      Message finished = finishedByAnother(a, b, "zq8"); // partition p
      a.queue("zq8").partition("q").push(Map.of("n", 0));
      Message mine = a.queue("zq8").consumer().pop().get(0); // partition q, a's live lease
      CommitResult r = a.transaction().put("zstate8", "k", Map.of("v", 1), Kv.forever()).ack(List.of(finished, mine))
          .commit();
      assertThat(r.reason()).isEqualTo(CommitResult.Reason.ALREADY_ACKED);
      assertThat(a.kv().get("zstate8", "k").found()).isFalse();
      assertThat(a.ack(mine).outcome()).as("its own message was not acknowledged by the refused bundle")
          .isEqualTo(AckOutcome.ACKED);
    }
  }

  @Test
  void theConsumeLoopOfAStalledNodeNeverCommitsItsEffectASecondTime(DataSource ds) throws Exception {
    String q = "zq6";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    try (Queen a = node(frozen, "zombie-loop-a"); Queen b = node(ds, "zombie-loop-b")) {
      a.queue(q).partition("p").push(Map.of("n", 0));
      CountDownLatch inHandler = new CountDownLatch(1);
      CountDownLatch goOn = new CountDownLatch(1);
      try (Subscription s = a.queue(q).group("g").subscription(SubscriptionMode.ALL)
          .consumeInTransaction((m, tx) -> {
            inHandler.countDown();
            goOn.await();
            tx.push(q + "-effects", "p", Map.of("by", "a")); // no marker: the ack's fence alone keeps it out
          })) {
        assertThat(inHandler.await(10, TimeUnit.SECONDS)).isTrue();
        LivenessTest.kill(frozen, a); // a looks dead from here on (a pause): b may take its lease; its threads go on
        List<Message> taken = b.queue(q).group("g").subscription(SubscriptionMode.ALL).pop();
        assertThat(taken).hasSize(1);
        b.transaction().push(q + "-effects", "p", Map.of("by", "b")).ack(taken.get(0)).commit();
        goOn.countDown();
        Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> s.leaseLost() == 1);
        assertThat(s.acked()).isZero();
      }
      assertThat(count(ds, q + "-effects")).as("the effect once, by the node that finished the message").isEqualTo(1);
    }
  }

  private static long count(DataSource ds, String queue) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select count(*)"
        + " from queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues q on q.id = p.queue_id"
        + " where q.name = ?")) {
      st.setString(1, queue);
      try (var rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }
}
