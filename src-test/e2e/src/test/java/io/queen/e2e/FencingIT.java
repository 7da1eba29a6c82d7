package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every acknowledgement is fenced by its lease: once another consumer (on another node) took the
 * partition over, the old holder's acks and renewals are rejected and change nothing; the new holder's
 * messages are unaffected and nothing is skipped.
 */
@QueenPostgres
class FencingIT {
  private static final String G = Queen.DEFAULT_GROUP;
  private E2e.Nodes nodes;
  private Queen a;
  private Queen b;

  @BeforeEach
  void start(TestDatabase db) {
    a = node(db, "fence-a");
    b = node(db, "fence-b");
  }

  @AfterEach
  void stop() throws Exception {
    if (nodes != null) {
      nodes.close();
    }
  }

  private Queen node(TestDatabase db, String id) {
    if (nodes == null) {
      nodes = new E2e.Nodes(db, 4);
    }
    return nodes.node(id);
  }

  private static void push(Queen node, String q, int n) {
    List<Object> payloads = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      payloads.add(Map.of("n", i));
    }
    node.queue(q).partition("p").pushAll(payloads);
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void ackAfterTakeoverIsRejectedAndDoesNotMoveTheCursor() {
    String q = "fence-takeover";
    push(a, q, 5);

    List<Message> old = a.queue(q).consumer().batch(10).leaseTime(Duration.ofSeconds(1)).pop();
    assertThat(old).extracting(Message::offset).containsExactly(0L, 1L, 2L, 3L, 4L);
    assertThat(b.queue(q).consumer().batch(10).pop()).as("held by a").isEmpty();
    assertThat(a.renew(old.get(0))).as("renew while the lease is held").isTrue();

    // b takes the partition over once a's lease expired; the expiry counts as an attempt of the head,
    // which is then delivered alone
    List<Message> taken = within(Duration.ofSeconds(10))
        .until(() -> b.queue(q).consumer().batch(10).pop(), got -> !got.isEmpty());
    assertThat(taken).extracting(Message::offset).containsExactly(0L);
    assertThat(taken.get(0).attempt()).isEqualTo(2);
    assertThat(taken.get(0).leaseId()).isNotEqualTo(old.get(0).leaseId());

    // a, the old holder: everything it tries is rejected
    assertThat(a.ack(old)).extracting(AckResult::outcome).containsOnly(AckOutcome.LEASE_LOST);
    assertThat(a.ack(old.get(0), AckStatus.FAILED, "late failure")).extracting(AckResult::outcome)
        .isEqualTo(AckOutcome.LEASE_LOST);
    assertThat(a.ack(old.get(4), AckStatus.DEAD_LETTER, "late dead letter")).extracting(AckResult::outcome)
        .isEqualTo(AckOutcome.LEASE_LOST);
    assertThat(a.renew(old.get(0))).as("renew after takeover").isFalse();
    assertThat(lag(a, q, G)).as("the rejected acks did not move the cursor").isEqualTo(5);
    assertThat(a.deadLetters(q).defaultGroup().count()).isZero();

    // b, the new holder, is unaffected: its lease still works and nothing is skipped
    assertThat(b.renew(taken.get(0))).isTrue();
    assertThat(b.ack(taken)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    List<Message> rest = b.queue(q).consumer().batch(10).pop();
    assertThat(rest).extracting(Message::offset).containsExactly(1L, 2L, 3L, 4L);
    assertThat(rest).extracting(Message::attempt).containsOnly(1);
    assertThat(b.ack(rest)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(lag(b, q, G)).isZero();
    assertThat(b.queue(q).consumer().batch(10).pop()).isEmpty();

    List<Long> seenByB = new ArrayList<>();
    taken.forEach(m -> seenByB.add(m.offset()));
    rest.forEach(m -> seenByB.add(m.offset()));
    assertThat(seenByB).as("the new holder saw every message, in order").containsExactly(0L, 1L, 2L, 3L, 4L);
    // once the group is past them, the old holder's acks are answered ALREADY_ACKED (whatever lease they carry):
    // still nothing changes, and the answer is the truth (the new holder acknowledged them)
    assertThat(a.ack(old)).as("after the new holder finished").extracting(AckResult::outcome)
        .containsOnly(AckOutcome.ALREADY_ACKED);
    assertThat(lag(a, q, G)).isZero();
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void ackAfterExpiryBeforeAnyTakeoverIsRejectedToo() {
    String q = "fence-expired";
    push(a, q, 3);
    List<Message> old = a.queue(q).consumer().batch(10).leaseTime(Duration.ofMillis(300)).pop();
    assertThat(old).hasSize(3);
    within(Duration.ofSeconds(10)).until(() -> E2e.leases(b, q, G) == 0);

    assertThat(a.ack(old)).extracting(AckResult::outcome).containsOnly(AckOutcome.LEASE_LOST);
    assertThat(a.renew(old.get(0))).isFalse();
    assertThat(lag(a, q, G)).isEqualTo(3);

    List<Message> again = b.queue(q).consumer().batch(10).pop();
    assertThat(again).extracting(Message::offset).containsExactly(0L);
    assertThat(again.get(0).attempt()).as("the expired lease counted as an attempt").isEqualTo(2);
    assertThat(b.ack(again)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    List<Message> rest = b.queue(q).consumer().batch(10).pop();
    assertThat(rest).extracting(Message::offset).containsExactly(1L, 2L);
    assertThat(b.ack(rest)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(lag(b, q, G)).isZero();
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void partialAckBeforeTakeoverKeepsItsPrefixAndTheRestGoesToTheNewHolder() {
    String q = "fence-prefix";
    push(a, q, 4);
    List<Message> old = a.queue(q).consumer().batch(10).leaseTime(Duration.ofSeconds(1)).pop();
    assertThat(old).hasSize(4);
    // a completes the prefix 0..1 in time: the cursor moves over it, the lease stays for 2..3
    assertThat(a.ack(old.subList(0, 2))).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(lag(a, q, G)).isEqualTo(2);

    List<Message> taken = within(Duration.ofSeconds(10))
        .until(() -> b.queue(q).consumer().batch(10).pop(), got -> !got.isEmpty());
    assertThat(taken).extracting(Message::offset).containsExactly(2L);
    assertThat(a.ack(old.subList(2, 4))).extracting(AckResult::outcome).containsOnly(AckOutcome.LEASE_LOST);
    assertThat(lag(a, q, G)).isEqualTo(2);
    assertThat(b.ack(taken)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    List<Message> rest = b.queue(q).consumer().batch(10).pop();
    assertThat(rest).extracting(Message::offset).containsExactly(3L);
    assertThat(b.ack(rest)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(lag(b, q, G)).isZero();
  }
}
