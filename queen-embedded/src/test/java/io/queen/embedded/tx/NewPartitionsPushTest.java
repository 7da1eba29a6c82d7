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
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
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

  /** Creates the queue, then group "g" on it (a pop does not create a missing queue), before any partition exists. */
  private void groupFirst(String q) {
    queen.queue(q).configure(c -> c.leaseTime(java.time.Duration.ofSeconds(30)));
    assertThat(queen.queue(q).group("g").subscription(SubscriptionMode.ALL).pop()).isEmpty();
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
   * later migration that replaced push from an older body would lose that silently, and the
   * behaviour tests cannot see it (the offsets are right either way; only the extra row version is gone).
   */
  @Test
  void theInstalledPushCreatesNewPartitionsAtTheirFinalOffset() throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
        "select p.prosrc from pg_proc p join pg_namespace n on n.oid = p.pronamespace"
            + " where n.nspname = 'newparts' and p.proname = 'push' and 'p_anchors' = any(p.proargnames)")) {
      // (the previous version's push stays, with its own signature, for nodes of that version during an upgrade)
      assertThat(rs.next()).isTrue();
      // (the partitions are inserted without ON CONFLICT first, with an ON CONFLICT statement as the fallback)
      assertThat(rs.getString(1)).contains("v_preset").contains("payload_type").contains("v_created")
          .contains("exception when unique_violation").contains("on conflict (queue_id, name) do nothing");
      assertThat(rs.next()).as("one push function this version calls").isFalse();
    }
  }

  @Test
  void newPartitionsTakeOffsetsFromZeroSkipDuplicatesAndTheNextPushAppends() throws Exception {
    String q = "np-open";
    // a group first, so the new partitions get cursors in the same call
    groupFirst(q);
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

  /**
   * The transaction-id probe reads one index entry per item, whatever the statistics say. Statistics taken while the
   * log held nothing with a transaction id (a vacuum after a queue's messages were deleted) once made the cached plan
   * scan the whole index and unnest the items again for every entry: each push read the entire log, and a source
   * drain slowed down with every bundle. Here the log holds 5,000 ids the statistics do not know about, and a push of
   * 100 items (10 of them duplicates) must read about 100 entries of the index, not 5,000, also on its generic plan.
   */
  @Test
  void theTransactionIdProbeReadsOneEntryPerItemWhateverTheStatisticsSay() throws Exception {
    String q = "np-probe";
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("alter table newparts.messages set (autovacuum_enabled = false)");
    }
    try {
      fill(q, "old");
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute("delete from newparts.messages");
        st.execute("vacuum (truncate false) newparts.messages"); // pages kept, reltuples 0: "empty"
      }
      fill(q, "new");
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        for (int call = 0; call < 8; call++) { // past the five custom plans, onto the cached generic one
          c.setAutoCommit(false);
          try (ResultSet rs = st.executeQuery("select count(*) filter (where status = 'duplicate') from newparts.push("
              + "(select array_agg('" + q + "'::text) from generate_series(1, 100)),"
              + " (select array_agg('p' || (g % 20)) from generate_series(1, 100) g),"
              + " (select array_agg(jsonb_build_object('g', g)::text) from generate_series(1, 100) g),"
              + " (select array_agg(case when g <= 10 then 'new-' || g else 'call" + call + "-' || g end)"
              + "    from generate_series(1, 100) g),"
              + " (select array_agg(null::text) from generate_series(1, 100)))")) {
            rs.next();
            assertThat(rs.getInt(1)).as("duplicates in call %d", call).isEqualTo(10);
          }
          try (ResultSet rs = st.executeQuery(
              "select pg_stat_get_xact_tuples_returned('newparts.messages_transaction_id'::regclass)")) {
            rs.next();
            assertThat(rs.getLong(1)).as("index entries the probe read in call %d", call).isLessThanOrEqualTo(100);
          }
          c.rollback();
          c.setAutoCommit(true);
        }
      }
    } finally {
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute("alter table newparts.messages reset (autovacuum_enabled)");
      }
    }
  }

  /** 5,000 messages over 20 partitions of {@code q}, transaction ids {@code prefix-1 .. prefix-5000}. */
  private void fill(String q, String prefix) {
    for (int b = 0; b < 5; b++) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 1; i <= 1000; i++) {
        int n = b * 1000 + i;
        items.add(item(q, "p" + (n % 20), prefix + "-" + n, n));
      }
      queen.queue(q).push(items);
    }
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

  /**
   * Partitions created by the push that stores their first items (not locked again, no transaction-id probes against
   * the log): a transaction id repeated within the batch is a duplicate of its first item, and the same ids in a
   * second push are duplicates with the first push's message ids and offsets, while new ids append after them.
   */
  @Test
  void createdPartitionsDeduplicateWithinTheBatchAndAgainstTheNextPush() throws Exception {
    String q = "np-dedup";
    groupFirst(q);
    List<PushItem> first = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      // 100 partitions, 3 items each; every third item repeats the transaction id of its partition's first item
      int p = i % 100;
      int k = i / 100;
      first.add(item(q, "p" + p, k == 2 ? "t" + p + "-0" : "t" + p + "-" + k, i));
    }
    List<PushResult> r1 = queen.queue(q).push(first);
    for (int i = 0; i < 300; i++) {
      PushResult r = r1.get(i);
      int p = i % 100;
      int k = i / 100;
      if (k == 2) {
        assertThat(r.status()).as("item %d", i).isEqualTo(PushStatus.DUPLICATE);
        assertThat(r.messageId()).isEqualTo(r1.get(p).messageId());
        assertThat(r.offset()).isEqualTo(0L);
      } else {
        assertThat(r.status()).as("item %d", i).isEqualTo(PushStatus.QUEUED);
        assertThat(r.offset()).isEqualTo((long) k);
      }
    }
    Map<String, Long> expected = new HashMap<>();
    for (int p = 0; p < 100; p++) {
      expected.put("p" + p, 2L);
    }
    assertThat(nextOffsets(q)).containsExactlyInAnyOrderEntriesOf(expected);

    // the same transaction ids again, then a new one per partition: duplicates of the first push, then offset 2
    List<PushItem> second = new ArrayList<>();
    for (int p = 0; p < 100; p++) {
      second.add(item(q, "p" + p, "t" + p + "-1", 1000 + p));
      second.add(item(q, "p" + p, "t" + p + "-9", 2000 + p));
      second.add(item(q, "p" + p, "t" + p + "-0", 3000 + p));
    }
    List<PushResult> r2 = queen.queue(q).push(second);
    for (int p = 0; p < 100; p++) {
      assertThat(r2.get(3 * p)).extracting(PushResult::status, PushResult::messageId, PushResult::offset)
          .containsExactly(PushStatus.DUPLICATE, r1.get(100 + p).messageId(), 1L);
      assertThat(r2.get(3 * p + 1)).extracting(PushResult::status, PushResult::offset).containsExactly(PushStatus.QUEUED, 2L);
      assertThat(r2.get(3 * p + 2)).extracting(PushResult::status, PushResult::messageId, PushResult::offset)
          .containsExactly(PushStatus.DUPLICATE, r1.get(p).messageId(), 0L);
      expected.put("p" + p, 3L);
    }
    assertThat(nextOffsets(q)).containsExactlyInAnyOrderEntriesOf(expected);
    assertOffsetsGapless(q, 3, 100);
    assertThat(pendingCursors(q, "g")).isEqualTo(100);
  }

  /**
   * Two pushes creating the same new partitions at once, on two connections: the second waits on the first's rows,
   * finds them committed, and appends after their items; with a group, every partition gets its one cursor.
   */
  @Test
  void concurrentPushesCreatingTheSamePartitionsKeepOffsetsGapless(TestDatabase db) throws Exception {
    String q = "np-race";
    groupFirst(q);
    int rounds = 8;
    int partitions = 150;
    for (int round = 0; round < rounds; round++) {
      CyclicBarrier barrier = new CyclicBarrier(2);
      List<CompletableFuture<List<PushResult>>> pushes = new ArrayList<>();
      for (int t = 0; t < 2; t++) {
        List<PushItem> items = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
          // both threads name every partition of the round, in opposite orders, two items each
          int pp = t == 0 ? p : partitions - 1 - p;
          items.add(item(q, "r" + round + "-" + pp, "t" + t + "-" + round + "-" + pp + "-a", p));
          items.add(item(q, "r" + round + "-" + pp, "t" + t + "-" + round + "-" + pp + "-b", p));
        }
        pushes.add(CompletableFuture.supplyAsync(() -> {
          try {
            barrier.await(10, TimeUnit.SECONDS);
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
          return queen.queue(q).push(items);
        }));
      }
      for (CompletableFuture<List<PushResult>> f : pushes) {
        assertThat(f.get(30, TimeUnit.SECONDS)).extracting(PushResult::status).containsOnly(PushStatus.QUEUED);
      }
    }

    // and deterministically: one push holds its new partitions uncommitted while the other waits on them. The
    // waiting push's insert (no ON CONFLICT) fails once they commit; its fallback skips them, creates its
    // own 10, and the look-up after it finds the 50
    List<String> names = new ArrayList<>();
    for (int p = 0; p < 50; p++) {
      names.add("held-" + p);
    }
    try (Connection a = db.connection()) {
      a.setAutoCommit(false);
      String[] qs = new String[50];
      String[] txns = new String[50];
      String[] payloads = new String[50];
      for (int p = 0; p < 50; p++) {
        qs[p] = q;
        txns[p] = "held-a-" + p;
        payloads[p] = "{\"n\": " + p + "}";
      }
      try (PreparedStatement st = a.prepareStatement("select count(*) from newparts.push(?::text[], ?::text[],"
          + " ?::text[], ?::text[], ?::text[], true, null, null, null, null, null, null)")) {
        st.setArray(1, a.createArrayOf("text", qs));
        st.setArray(2, a.createArrayOf("text", names.toArray()));
        st.setArray(3, a.createArrayOf("text", payloads));
        st.setArray(4, a.createArrayOf("text", txns));
        st.setArray(5, a.createArrayOf("text", new String[50]));
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          assertThat(rs.getInt(1)).isEqualTo(50);
        }
      }
      List<PushItem> items = new ArrayList<>();
      for (int p = 0; p < 60; p++) {
        // the 50 partitions the other transaction holds, and 10 of its own
        items.add(item(q, p < 50 ? "held-" + p : "own-" + p, "held-b-" + p, p));
      }
      CompletableFuture<List<PushResult>> waiting = CompletableFuture.supplyAsync(() -> queen.queue(q).push(items));
      Awaitility.await().atMost(10, TimeUnit.SECONDS).until(() -> waitersOnALock(db) > 0);
      assertThat(waiting).isNotDone();
      a.commit();
      List<PushResult> got = waiting.get(30, TimeUnit.SECONDS);
      for (int p = 0; p < 60; p++) {
        assertThat(got.get(p)).extracting(PushResult::status, PushResult::offset)
            .containsExactly(PushStatus.QUEUED, p < 50 ? 1L : 0L);
      }
    }

    Map<String, Long> next = nextOffsets(q);
    assertThat(next).hasSize(rounds * partitions + 60);
    for (int round = 0; round < rounds; round++) {
      for (int p = 0; p < partitions; p++) {
        assertThat(next).containsEntry("r" + round + "-" + p, 4L);
      }
    }
    assertOffsetsGapless(q, -1, rounds * partitions + 60);
    // every message exactly once: each transaction id of the rounds stored once, in its partition
    Set<String> txns = new HashSet<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
        "select coalesce(m.transaction_id, m.id::text), p.name from newparts.messages m join newparts.partitions p on p.id = m.partition_id"
            + " join newparts.queues qq on qq.id = p.queue_id where qq.name = '" + q + "'")) {
      while (rs.next()) {
        assertThat(txns.add(rs.getString(1))).as("stored once: %s", rs.getString(1)).isTrue();
        String t = rs.getString(1);
        if (t.startsWith("t")) {
          String[] parts = t.split("-");
          assertThat(rs.getString(2)).isEqualTo("r" + parts[1] + "-" + parts[2]);
        }
      }
    }
    assertThat(txns).hasSize(rounds * partitions * 4 + 50 + 60);
    assertThat(pendingCursors(q, "g")).isEqualTo(rounds * partitions + 60);
  }

  private static int waitersOnALock(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
        "select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'")) {
      rs.next();
      return rs.getInt(1);
    }
  }

  /** Every partition of the queue holds offsets 0..next_offset-1, each once ({@code perPartition} of them when >= 0). */
  private void assertOffsetsGapless(String queue, int perPartition, int partitions) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
        "select p.name, p.next_offset, count(m.\"offset\"), count(distinct m.\"offset\"), min(m.\"offset\"), max(m.\"offset\")"
            + " from newparts.partitions p join newparts.queues q on q.id = p.queue_id"
            + " left join newparts.messages m on m.partition_id = p.id where q.name = '" + queue + "' group by p.id")) {
      int seen = 0;
      while (rs.next()) {
        seen++;
        String name = rs.getString(1);
        long next = rs.getLong(2);
        assertThat(rs.getLong(3)).as("messages of %s", name).isEqualTo(next);
        assertThat(rs.getLong(4)).as("distinct offsets of %s", name).isEqualTo(next);
        assertThat(rs.getLong(5)).as("first offset of %s", name).isZero();
        assertThat(rs.getLong(6)).as("last offset of %s", name).isEqualTo(next - 1);
        if (perPartition >= 0) {
          assertThat(next).as("next offset of %s", name).isEqualTo(perPartition);
        }
      }
      assertThat(seen).isEqualTo(partitions);
    }
  }

  /** The group's cursors on the queue with has_pending set; every partition has exactly one cursor of the group. */
  private int pendingCursors(String queue, String group) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
        "select count(distinct p.id), count(c.partition_id), count(*) filter (where c.has_pending)"
            + " from newparts.partitions p join newparts.queues q on q.id = p.queue_id"
            + " left join newparts.cursors c on c.partition_id = p.id and c.group_name = '" + group + "'"
            + " where q.name = '" + queue + "'")) {
      rs.next();
      assertThat(rs.getInt(2)).as("one cursor per partition").isEqualTo(rs.getInt(1));
      return rs.getInt(3);
    }
  }
}
