package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.CommitResult;
import io.queen.Message;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/** One rule for repeated acks; LEASE_LOST only when the lease is really gone. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AckRulesTest {
  private Queen queen;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("acks").pollInterval(Duration.ofMillis(50)).start();
    q = "q-" + info.getTestMethod().orElseThrow().getName();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private List<Message> pushAndPop(int n, int batch) {
    for (int i = 0; i < n; i++) {
      queen.queue(q).partition("p").push(Map.of("n", i));
    }
    return queen.queue(q).consumer().batch(batch).pop();
  }

  @Test
  void aSecondAckIsAlreadyAckedWhetherTheLeaseEndedOrNot() {
    // a batch of 1: the first ack ends the lease
    List<Message> one = pushAndPop(1, 1);
    assertThat(queen.ack(one.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
    AckResult again = queen.ack(one.get(0));
    assertThat(again.outcome()).isEqualTo(AckOutcome.ALREADY_ACKED);
    assertThat(again.success()).isTrue();
    // a batch of 3: the lease is still held for the other two
    List<Message> three = pushAndPop(3, 3);
    assertThat(queen.ack(three.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
    assertThat(queen.ack(three.get(0)).outcome()).isEqualTo(AckOutcome.ALREADY_ACKED);
    // acked ahead of a gap, then again: already acked by this lease
    assertThat(queen.ack(three.get(2)).outcome()).isEqualTo(AckOutcome.ACKED);
    assertThat(queen.ack(three.get(2), AckStatus.FAILED, "late").outcome()).isEqualTo(AckOutcome.ALREADY_ACKED);
    // the same message twice in one call
    assertThat(queen.ack(List.of(three.get(1), three.get(1)))).extracting(AckResult::outcome)
        .containsExactly(AckOutcome.ACKED, AckOutcome.ALREADY_ACKED);
    assertThat(queen.ack(three)).extracting(AckResult::outcome).containsOnly(AckOutcome.ALREADY_ACKED);
    assertThat(queen.status().queue(q).groups().get(0).lag()).isZero();
    assertThat(queen.status().queue(q).groups().get(0).leases()).isZero();
  }

  @Test
  void anAckRetriedAfterItsCommitReportsAlreadyAcked() {
    // what the connection-loss retry sees when the first try committed but its reply was lost: the same ack, same lease
    List<Message> got = pushAndPop(2, 2);
    assertThat(queen.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(queen.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ALREADY_ACKED);
    assertThat(queen.queue(q).consumer().pop()).isEmpty();
  }

  @Test
  void aFailureAckGivesTheLeaseUpSoALaterAckOfItIsLeaseLost() {
    List<Message> got = pushAndPop(1, 1);
    assertThat(queen.ack(got.get(0), AckStatus.FAILED, "x").outcome()).isEqualTo(AckOutcome.RETRY_SCHEDULED);
    assertThat(queen.ack(got.get(0)).outcome()).as("the lease was given up by the failure: not acked")
        .isEqualTo(AckOutcome.LEASE_LOST);
    List<Message> again = queen.queue(q).consumer().pop();
    assertThat(again).extracting(Message::offset).containsExactly(0L);
    assertThat(queen.ack(again.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
    // now the group is past it: the old delivery's ack is answered ALREADY_ACKED, whatever lease it carries
    assertThat(queen.ack(got.get(0)).outcome()).isEqualTo(AckOutcome.ALREADY_ACKED);
  }

  @Test
  void aTakenOverLeaseIsLeaseLostUntilTheNewHolderAcks() throws Exception {
    pushAndPop(0, 1);
    queen.queue(q).partition("p").push(Map.of("n", 0));
    List<Message> zombie = queen.queue(q).consumer().leaseTime(Duration.ofMillis(150)).pop();
    Thread.sleep(300);
    List<Message> holder = queen.queue(q).consumer().pop();
    assertThat(holder).hasSize(1);
    assertThat(queen.ack(zombie.get(0)).outcome()).isEqualTo(AckOutcome.LEASE_LOST);
    // in one call: the old lease's message next to the new lease's whole range
    assertThat(queen.ack(List.of(holder.get(0), zombie.get(0)))).extracting(AckResult::outcome)
        .containsExactly(AckOutcome.ACKED, AckOutcome.ALREADY_ACKED);
  }

  @Test
  void alreadyAckedFailsABundleThatPushesOrWritesAndIsASuccessInABundleOfAcks() {
    List<Message> got = pushAndPop(1, 1);
    queen.ack(got.get(0));
    // the effects of a message acknowledged before the bundle (its earlier commit landed, or another consumer
    // finished it) would be made a second time: nothing of the bundle applies (ZombieBundleTest has the takeover)
    CommitResult res = queen.transaction().once("ns", "k-" + q, io.queen.Kv.forever()).ack(got.get(0)).commit();
    assertThat(res.success()).isFalse();
    assertThat(res.reason()).isEqualTo(CommitResult.Reason.ALREADY_ACKED);
    assertThat(res.acks()).extracting(AckResult::outcome).containsExactly(AckOutcome.ALREADY_ACKED);
    assertThat(queen.kv().get("ns", "k-" + q).found()).as("nothing of the bundle applied").isFalse();
    CommitResult plain = queen.transaction().push(q, "p", Map.of("n", 9)).ack(got.get(0)).commit();
    assertThat(plain.reason()).isEqualTo(CommitResult.Reason.ALREADY_ACKED);
    CommitResult acks = queen.transaction().ack(got.get(0)).commit();
    assertThat(acks.success()).as("an ack alone stays a success").isTrue();
    assertThat(acks.acks()).extracting(AckResult::outcome).containsExactly(AckOutcome.ALREADY_ACKED);
  }
}
