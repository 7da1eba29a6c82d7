package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.DeadLetter;
import io.queen.Message;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
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

/**
 * A stored payload the reader refuses (here put there by hand through SQL) never holds its
 * partition, keeps order, and does not break a page of the dead-letter list.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class UndecodablePayloadTest {
  private DataSource ds;
  private Queen queen;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("t1").start();
    q = "q-" + info.getTestMethod().orElseThrow().getName();
    // a lease far longer than the test: anything that waited for its expiry would time out
    queen.queue(q).configure(c -> c.leaseTime(Duration.ofMinutes(10)));
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  /** Replaces a stored payload by SQL with one that jsonb holds and the reader refuses. */
  private void spoil(long offset, String payloadSql) throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("update queen.messages m set payload = "
        + payloadSql + " from queen.partitions p join queen.queues q on q.id = p.queue_id"
        + " where p.id = m.partition_id and q.name = ? and m.\"offset\" = ?")) {
      st.setString(1, q);
      st.setLong(2, offset);
      assertThat(st.executeUpdate()).isEqualTo(1);
    }
  }

  private static final String LONG_NUMBER = "('{\"n\": ' || repeat('9', 2000) || '}')::jsonb"; // over maxNumberLength 1000

  @Test
  void undecodableMessagesAreDeadLetteredInOrderWithoutHoldingThePartition() throws Exception {
    for (int i = 0; i < 5; i++) {
      queen.queue(q).partition("p").push(Map.of("n", i));
    }
    spoil(1, LONG_NUMBER);
    spoil(3, LONG_NUMBER);

    // offset 0 is delivered; 1 cannot be, and nothing after it is delivered before it
    List<Message> first = queen.queue(q).consumer().batch(10).pop();
    assertThat(first).extracting(Message::offset).containsExactly(0L);
    assertThat(queen.queue(q).consumer().batch(10).pop()).as("one holder: the lease is still ours").isEmpty();
    assertThat(queen.ack(first)).extracting(r -> r.outcome()).containsExactly(AckOutcome.ACKED);

    // acking what was delivered released the partition: 1 is dead-lettered at once, 2 delivered, 3 cuts again
    List<Message> second = queen.queue(q).consumer().batch(10).pop();
    assertThat(second).extracting(Message::offset).containsExactly(2L);
    assertThat(queen.ack(second)).extracting(r -> r.outcome()).containsExactly(AckOutcome.ACKED);
    List<Message> third = queen.queue(q).consumer().batch(10).pop();
    assertThat(third).extracting(Message::offset).containsExactly(4L);
    assertThat(queen.ack(third)).extracting(r -> r.outcome()).containsExactly(AckOutcome.ACKED);
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();

    List<DeadLetter> dl = queen.deadLetters(q).defaultGroup().list(10, null);
    assertThat(dl).extracting(DeadLetter::offset).containsExactly(1L, 3L);
    assertThat(dl).allSatisfy(d -> {
      assertThat(d.payload()).isNull();
      assertThat(d.payloadError()).contains("beyond the reader's limits").contains("Number value length");
      assertThat(d.payloadBytes()).isEqualTo(2007);
      assertThat(d.error()).startsWith("payload cannot be decoded: stored JSON of 2007 bytes");
    });
  }

  @Test
  void anUndecodableHeadIsDeadLetteredAndTheRestDeliveredInTheSamePop() throws Exception {
    for (int i = 0; i < 3; i++) {
      queen.queue(q).partition("p").push(Map.of("n", i));
    }
    spoil(0, LONG_NUMBER);
    spoil(1, LONG_NUMBER);
    // a pop that only meets undecodable messages does not come back empty while deliverable ones wait
    List<Message> got = queen.queue(q).consumer().batch(2).pop();
    assertThat(got).extracting(Message::offset).containsExactly(2L);
    assertThat(queen.ack(got)).extracting(r -> r.outcome()).containsExactly(AckOutcome.ACKED);
    assertThat(queen.deadLetters(q).defaultGroup().count()).isEqualTo(2);

    // auto-ack: the cursor has already passed it, so it gets its dead-letter row and is not delivered
    queen.queue(q).partition("p").push(Map.of("n", 3));
    queen.queue(q).partition("p").push(Map.of("n", 4));
    spoil(3, LONG_NUMBER);
    assertThat(queen.queue(q).consumer().batch(10).autoAck(true).pop()).extracting(Message::offset).containsExactly(4L);
    assertThat(queen.deadLetters(q).defaultGroup().list(10, null)).extracting(DeadLetter::offset).containsExactly(0L, 1L, 3L);
  }

  @Test
  void anOversizedPayloadStoredByHandDoesNotBreakTheDeadLetterPage() throws Exception {
    queen.queue(q).configure(c -> c.leaseTime(Duration.ofMinutes(10)).retryLimit(0));
    for (int i = 0; i < 3; i++) {
      queen.queue(q).partition("p").push(Map.of("n", i));
    }
    List<Message> got = queen.queue(q).consumer().batch(10).pop();
    for (Message m : got) {
      queen.ack(m, io.queen.AckStatus.DEAD_LETTER, "test");
    }
    // 70 MiB of string: more than any node may write (64 MiB), and beyond every reader's limit
    spoil(1, "jsonb_build_object('s', repeat('x', 70 * 1024 * 1024))");
    List<DeadLetter> page = queen.deadLetters(q).defaultGroup().list(10, null);
    assertThat(page).extracting(DeadLetter::offset).containsExactly(0L, 1L, 2L);
    assertThat(page.get(0).payload().get("n").asInt()).isZero();
    assertThat(page.get(2).payload().get("n").asInt()).isEqualTo(2);
    DeadLetter bad = page.get(1);
    assertThat(bad.payload()).isNull();
    assertThat(bad.payloadBytes()).isEqualTo(70L * 1024 * 1024 + 9);
    assertThat(bad.payloadError()).contains("beyond the reader's limits").contains("String value length");

    // redriven, it is dead-lettered again at once, and does not hold the partition
    assertThat(queen.deadLetters(q).defaultGroup().redrive(bad)).isTrue();
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty();
    assertThat(queen.deadLetters(q).defaultGroup().list(10, null)).extracting(DeadLetter::offset)
        .containsExactlyInAnyOrder(0L, 1L, 2L);
  }
}
