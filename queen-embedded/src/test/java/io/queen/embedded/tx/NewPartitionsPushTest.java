package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.CommitResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.QueueFullException;
import io.queen.SubscriptionMode;
import io.queen.Transaction;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The de-duplicating push creating its partitions (the source connector's shape: caller transaction ids, many new
 * partitions per call): a new partition of an unbounded queue is created with its final {@code next_offset}, so its
 * offsets must still start at 0, stay gapless, skip in-batch duplicates, and the next push must append after them;
 * a bounded queue's new partitions keep the exact size check.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NewPartitionsPushTest {
  private Queen queen;
  private DataSource ds;

  @BeforeEach
  void start(DataSource ds) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).schema("newparts").start();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private static PushItem item(String q, String partition, String txn, int n) {
    return PushItem.to(q, partition, Map.of("n", n)).transactionId(txn);
  }

  private Map<String, Long> nextOffsets(String queue) throws Exception {
    Map<String, Long> out = new HashMap<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select p.name, p.next_offset from newparts.partitions p"
            + " join newparts.queues q on q.id = p.queue_id where q.name = '" + queue + "'")) {
      while (rs.next()) {
        out.put(rs.getString(1), rs.getLong(2));
      }
    }
    return out;
  }

  /**
   * The push a database ends up with after every migration still creates new partitions at their final offset: a
   * later migration that replaced push from an older body (V17 did, from V13's) loses that silently, and the
   * behaviour tests cannot see it (the offsets are right either way; only the extra row version is gone).
   */
  @Test
  void theInstalledPushCreatesNewPartitionsAtTheirFinalOffset() throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
        "select p.prosrc from pg_proc p join pg_namespace n on n.oid = p.pronamespace"
            + " where n.nspname = 'newparts' and p.proname = 'push'")) {
      assertThat(rs.next()).isTrue();
      assertThat(rs.getString(1)).contains("v_preset").contains("payload_type");
      assertThat(rs.next()).as("one push function").isFalse();
    }
  }

  @Test
  void newPartitionsTakeOffsetsFromZeroSkipDuplicatesAndTheNextPushAppends() throws Exception {
    String q = "np-open";
    // a group first, so the new partitions get cursors in the same call
    assertThat(queen.queue(q).group("g").subscription(SubscriptionMode.ALL).pop()).isEmpty();
    Transaction tx = queen.transaction();
    tx.push(item(q, "a", "t1", 0)).push(item(q, "b", "t2", 1)).push(item(q, "a", "t3", 2))
        .push(item(q, "a", "t1", 3)).push(item(q, "c", "t4", 4)).push(item(q, "c", "t5", 5)).push(item(q, "c", "t6", 6));
    CommitResult r = tx.commit();
    assertThat(r.success()).isTrue();
    assertThat(r.pushes()).extracting(PushResult::partition, PushResult::status, PushResult::offset).containsExactly(
        org.assertj.core.groups.Tuple.tuple("a", PushStatus.QUEUED, 0L),
        org.assertj.core.groups.Tuple.tuple("b", PushStatus.QUEUED, 0L),
        org.assertj.core.groups.Tuple.tuple("a", PushStatus.QUEUED, 1L),
        org.assertj.core.groups.Tuple.tuple("a", PushStatus.DUPLICATE, 0L),
        org.assertj.core.groups.Tuple.tuple("c", PushStatus.QUEUED, 0L),
        org.assertj.core.groups.Tuple.tuple("c", PushStatus.QUEUED, 1L),
        org.assertj.core.groups.Tuple.tuple("c", PushStatus.QUEUED, 2L));
    assertThat(r.pushes().get(3).messageId()).isEqualTo(r.pushes().get(0).messageId());
    assertThat(nextOffsets(q)).containsExactlyInAnyOrderEntriesOf(Map.of("a", 2L, "b", 1L, "c", 3L));

    // the next push to an existing partition appends; a stored transaction id is still a duplicate
    List<PushResult> more = queen.queue(q).push(List.of(item(q, "a", "t7", 7), item(q, "c", "t6", 8)));
    assertThat(more).extracting(PushResult::status, PushResult::offset)
        .containsExactly(org.assertj.core.groups.Tuple.tuple(PushStatus.QUEUED, 2L),
            org.assertj.core.groups.Tuple.tuple(PushStatus.DUPLICATE, 2L));
    assertThat(nextOffsets(q)).containsEntry("a", 3L).containsEntry("c", 3L);

    // the group sees every partition as pending and reads each in order
    List<Message> got = queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(100).partitions(10).pop();
    Map<String, List<Integer>> byPartition = new HashMap<>();
    for (Message m : got) {
      byPartition.computeIfAbsent(m.partition(), k -> new java.util.ArrayList<>()).add(m.payload().get("n").asInt());
    }
    assertThat(byPartition).containsExactlyInAnyOrderEntriesOf(
        Map.of("a", List.of(0, 2, 7), "b", List.of(1), "c", List.of(4, 5, 6)));
  }

  @Test
  void boundedQueueCountsNewPartitionsExactly() throws Exception {
    String q = "np-bounded";
    queen.queue(q).configure(c -> c.maxSize(3));
    assertThat(queen.queue(q).push(List.of(item(q, "x", "u1", 0), item(q, "y", "u2", 1), item(q, "y", "u3", 2))))
        .extracting(PushResult::offset).containsExactly(0L, 0L, 1L);
    assertThat(nextOffsets(q)).containsExactlyInAnyOrderEntriesOf(Map.of("x", 1L, "y", 2L));
    assertThatThrownBy(() -> queen.queue(q).push(List.of(item(q, "z", "u4", 3))))
        .isInstanceOf(QueueFullException.class);
    assertThat(nextOffsets(q)).doesNotContainKey("z");
    assertThat(queen.status().queue(q).messages()).isEqualTo(3);
  }
}
