package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.CommitResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 14: every pushed item carries a transaction id (generated when the caller gives none).
 */
@QueenPostgres
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PushRetryTest {
  private static final String UUID_V7 = "[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";

  private DataSource ds;
  private Queen queen;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("t1").start();
    q = "r-" + info.getTestMethod().orElseThrow().getName().substring(0, 12);
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private static Map<String, Object> body(int seq) {
    return Map.of("seq", seq);
  }

  @Test
  void generatedTransactionIdsArePresentUniqueAndTimeOrdered() {
    long before = System.currentTimeMillis();
    List<PushResult> all = new ArrayList<>();
    all.add(queen.queue(q).partition("a").push(body(0))); // a new partition: the full push
    List<Object> many = new ArrayList<>();
    for (int i = 1; i < 100; i++) {
      many.add(body(i));
    }
    all.addAll(queen.queue(q).partition("a").pushAll(many)); // push_fast
    for (int i = 100; i < 150; i++) {
      all.add(queen.queue(q).partition(i % 2 == 0 ? "a" : "b").push(body(i)));
    }
    CommitResult bundle = queen.transaction().push(q, "a", body(150)).commit();
    assertThat(bundle.success()).isTrue();
    all.addAll(bundle.pushes());
    long after = System.currentTimeMillis();

    Set<String> seen = new HashSet<>();
    String previous = "";
    for (PushResult r : all) {
      assertThat(r.status()).isEqualTo(PushStatus.QUEUED);
      assertThat(r.transactionId()).matches(UUID_V7).isEqualTo(r.messageId().toString());
      assertThat(seen.add(r.transactionId())).as("unique").isTrue();
      assertThat(r.transactionId()).as("time-ordered").isGreaterThan(previous);
      previous = r.transactionId();
      long millis = r.messageId().getMostSignificantBits() >>> 16;
      assertThat(millis).isBetween(before, after + 5); // up to 4096 ids a millisecond may carry into the next one
    }

    Map<UUID, String> byId = new HashMap<>();
    List<Message> got = queen.queue(q).group("check").subscription(SubscriptionMode.ALL).batch(1000).partitions(2).pop();
    got.forEach(m -> byId.put(m.id(), m.transactionId()));
    assertThat(byId).hasSize(all.size());
    for (PushResult r : all) {
      assertThat(byId.get(r.messageId())).isEqualTo(r.transactionId());
    }
  }

  @Test
  void aCallersOwnTransactionIdStaysDeduplicated() {
    PushResult first = queen.queue(q).push(List.of(PushItem.of("p", body(1)).transactionId("t-1"))).get(0);
    List<PushResult> again = queen.queue(q).push(List.of(PushItem.of("p", body(2)).transactionId("t-1"),
        PushItem.of("p", body(3)), PushItem.of("p", body(4)).transactionId("t-2"), PushItem.of("p", body(5)).transactionId("t-2")));
    assertThat(again.get(0).status()).isEqualTo(PushStatus.DUPLICATE);
    assertThat(again.get(0).messageId()).isEqualTo(first.messageId());
    assertThat(again.get(0).offset()).isEqualTo(first.offset());
    assertThat(again.get(0).transactionId()).isEqualTo("t-1");
    assertThat(again.get(1).status()).isEqualTo(PushStatus.QUEUED);
    assertThat(again.get(1).transactionId()).matches(UUID_V7);
    assertThat(again.get(2).status()).isEqualTo(PushStatus.QUEUED);
    assertThat(again.get(3).status()).isEqualTo(PushStatus.DUPLICATE); // within the batch
    assertThat(again.get(3).messageId()).isEqualTo(again.get(2).messageId());
    assertThat(storedSeqs(q)).containsExactlyInAnyOrderEntriesOf(Map.of(1, 1, 3, 1, 4, 1));
  }

  private void assertStoredAsReported(List<PushResult> rs) {
    Map<UUID, long[]> rows = storedRows(rs.get(0).queue());
    for (PushResult r : rs) {
      assertThat(rows.get(r.messageId())).as("message %s", r.messageId()).isNotNull();
      assertThat(rows.get(r.messageId())[1]).isEqualTo(r.offset());
    }
  }

  /** seq → how many stored messages carry it. */
  private Map<Integer, Integer> storedSeqs(String queue) {
    Map<Integer, Integer> out = new HashMap<>();
    for (long[] row : storedRows(queue).values()) {
      out.merge((int) row[0], 1, Integer::sum);
    }
    return out;
  }

  /** message id → {seq, offset}. */
  private Map<UUID, long[]> storedRows(String queue) {
    Map<UUID, long[]> out = new HashMap<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.id, (m.payload->>'seq')::int,"
        + " m.\"offset\" from queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues qq"
        + " on qq.id = p.queue_id where qq.name = ?")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getObject(1, UUID.class), new long[] {rs.getInt(2), rs.getLong(3)});
        }
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return out;
  }
}
