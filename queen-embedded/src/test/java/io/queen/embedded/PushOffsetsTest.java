package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The common push (existing partitions, unbounded queues, generated transaction ids; {@code push_fast}, and
 * {@code push_partition} for a batch into one partition): gapless offsets as reported under concurrent pushes that
 * share partitions, the cursor flag a consumer cleared set again, and the one-partition path writing nothing where the
 * full push must decide; and the full push's offsets in large batches over many partitions on one connection.
 */
@QueenPostgres
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PushOffsetsTest {
  private DataSource ds;
  private Queen queen;

  @BeforeEach
  void start(DataSource ds) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("offsets").start();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  @Test
  void aPushFlagsTheCursorThatAConsumerCleared() throws Exception {
    String q = "plain-flag";
    queen.queue(q).partition("p").push(Map.of("n", 0));
    List<Message> got = queen.queue(q).consumer().batch(10).pop();
    assertThat(got).hasSize(1);
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("update queen.partitions p"
        + " set last_message_at = now() - interval '2 seconds' from queen.queues qq where qq.id = p.queue_id and qq.name = ?")) {
      st.setString(1, q);
      st.executeUpdate(); // not pushed to in the last 100 ms: the ack that catches the cursor up clears the flag
    }
    queen.ack(got);
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty(); // finds nothing
    assertThat(hasPending(q)).isFalse();
    PushResult r = queen.queue(q).partition("p").push(Map.of("n", 1));
    assertThat(hasPending(q)).isTrue();
    List<Message> next = queen.queue(q).consumer().batch(10).pop();
    assertThat(next).extracting(Message::offset).containsExactly(r.offset());
    assertThat(r.offset()).isEqualTo(1L);
  }

  @Test
  void concurrentPushesOverSharedPartitionsGetGaplessOffsetsAsReported() throws Exception {
    String q = "plain-conc";
    String[] names = {"w", "x", "y", "z"};
    List<PushItem> seed = new ArrayList<>();
    for (String n : names) {
      seed.add(PushItem.of(n, Map.of("seed", n)));
    }
    queen.queue(q).push(seed);
    int threads = 8;
    int pushes = 40;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<List<PushResult>>> futures = new ArrayList<>();
    try {
      for (int t = 0; t < threads; t++) {
        int index = t;
        futures.add(pool.submit(() -> {
          SplittableRandom random = new SplittableRandom(index);
          List<PushResult> mine = new ArrayList<>();
          for (int i = 0; i < pushes; i++) {
            // three of the four partitions, in a random order: pushes lock shared rows in id order, so none deadlocks
            List<PushItem> items = new ArrayList<>();
            int skip = random.nextInt(names.length);
            for (int k = 0; k < 9; k++) {
              int p = random.nextInt(names.length - 1);
              items.add(PushItem.of(names[p >= skip ? p + 1 : p], Map.of("t", index, "i", i, "k", k)));
            }
            mine.addAll(queen.queue(q).push(items));
          }
          return mine;
        }));
      }
      Map<UUID, String> reported = new HashMap<>();
      for (Future<List<PushResult>> f : futures) {
        for (PushResult r : f.get()) {
          assertThat(r.status()).isEqualTo(PushStatus.QUEUED);
          reported.put(r.messageId(), r.partition() + "/" + r.offset());
        }
      }
      assertThat(reported).hasSize(threads * pushes * 9);
      Map<UUID, String> stored = new HashMap<>();
      Map<String, Long> count = new HashMap<>();
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select p.name, m.\"offset\", m.id,"
          + " p.next_offset from queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues qq"
          + " on qq.id = p.queue_id where qq.name = ? order by p.name, m.\"offset\"")) {
        st.setString(1, q);
        try (ResultSet r = st.executeQuery()) {
          while (r.next()) {
            String p = r.getString(1);
            long expected = count.merge(p, 1L, Long::sum) - 1;
            assertThat(r.getLong(2)).as("gapless offsets of " + p).isEqualTo(expected);
            stored.put(r.getObject(3, UUID.class), p + "/" + r.getLong(2));
          }
        }
      }
      for (String n : names) {
        assertThat(nextOffset(q, n)).isEqualTo(count.get(n));
      }
      stored.keySet().retainAll(reported.keySet()); // without the seed
      assertThat(stored).isEqualTo(reported);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void concurrentPushesIntoOnePartitionGetGaplessOffsetsInItemOrder() throws Exception {
    // every push names one partition, so each goes through push_partition: its update takes the row lock and the
    // offsets together, and a push that waited for the lock must start where the one before it ended
    String q = "one-partition";
    queen.queue(q).partition("hot").push(Map.of("seed", 0));
    int threads = 8;
    int pushes = 60;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<List<PushResult>>> futures = new ArrayList<>();
    try {
      for (int t = 0; t < threads; t++) {
        int index = t;
        futures.add(pool.submit(() -> {
          SplittableRandom random = new SplittableRandom(100 + index);
          List<PushResult> mine = new ArrayList<>();
          for (int i = 0; i < pushes; i++) {
            int size = random.nextInt(3) == 0 ? 1 + random.nextInt(7) : 1; // mostly single messages, some batches
            List<PushItem> items = new ArrayList<>();
            for (int k = 0; k < size; k++) {
              items.add(PushItem.of("hot", Map.of("t", index, "i", i, "k", k)));
            }
            List<PushResult> got = queen.queue(q).push(items);
            for (int k = 1; k < got.size(); k++) {
              assertThat(got.get(k).offset()).as("a batch's items in order").isEqualTo(got.get(k - 1).offset() + 1);
            }
            mine.addAll(got);
          }
          return mine;
        }));
      }
      Map<UUID, Long> reported = new HashMap<>();
      for (Future<List<PushResult>> f : futures) {
        for (PushResult r : f.get()) {
          assertThat(r.status()).isEqualTo(PushStatus.QUEUED);
          assertThat(reported.put(r.messageId(), r.offset())).isNull();
        }
      }
      Map<UUID, Long> stored = new HashMap<>();
      long expected = 0;
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.\"offset\", m.id,"
          + " coalesce(m.transaction_id, m.id::text) from queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues qq"
          + " on qq.id = p.queue_id where qq.name = ? order by m.\"offset\"")) {
        st.setString(1, q);
        try (ResultSet r = st.executeQuery()) {
          while (r.next()) {
            assertThat(r.getLong(1)).as("gapless offsets").isEqualTo(expected++);
            UUID id = r.getObject(2, UUID.class);
            assertThat(r.getString(3)).as("the generated transaction id").isEqualTo(id.toString());
            stored.put(id, r.getLong(1));
          }
        }
      }
      assertThat(expected).isEqualTo(1 + reported.size());
      assertThat(nextOffset(q, "hot")).isEqualTo(expected);
      stored.keySet().retainAll(reported.keySet()); // without the seed
      assertThat(stored).isEqualTo(reported);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void theOnePartitionPathWritesNothingWhereTheFullPushMustDecide() throws Exception {
    queen.queue("pp-open").partition("a").push(Map.of("n", 0));
    queen.queue("pp-bounded").configure(c -> c.maxSize(5));
    queen.queue("pp-bounded").partition("a").push(Map.of("n", 0));
    try (Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement()) {
      // an encrypted queue (this node never looked at it: only the function's own check is involved)
      st.execute("insert into queen.queues(name, encryption) values ('pp-sealed', true)");
      st.execute("insert into queen.partitions(queue_id, name) select id, 'a' from queen.queues where name = 'pp-sealed'");
    }
    long before = messageCount();
    assertThat(pushPartition("pp-open", "missing", null)).as("a missing partition").isNull();
    assertThat(pushPartition("nope", "a", null)).as("a missing queue").isNull();
    assertThat(pushPartition("pp-bounded", "a", null)).as("a bounded queue").isNull();
    assertThat(pushPartition("pp-sealed", "a", null)).as("a plain payload to an encrypted queue").isNull();
    assertThat(messageCount()).isEqualTo(before);
    assertThat(nextOffset("pp-open", "a")).isEqualTo(1);
    assertThat(nextOffset("pp-bounded", "a")).isEqualTo(1);
    assertThat(nextOffset("pp-sealed", "a")).isZero();
    // sealed, it goes in; and the open queue's push lands at the next offset
    assertThat(pushPartition("pp-sealed", "a", "k1")).isEqualTo(0L);
    assertThat(pushPartition("pp-open", "a", null)).isEqualTo(1L);
    assertThat(messageCount()).isEqualTo(before + 2);
    try (Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement()) {
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> st.executeQuery("select * from queen.push_partition("
          + "'pp-open', 'a', array[gen_random_uuid()], array['{}', '{}']::text[], array[null::text], array['t'])"))
          .isInstanceOf(SQLException.class)
          .hasMessageContaining("argument arrays are empty or differ in length")
          .satisfies(e -> assertThat(((SQLException) e).getSQLState()).isEqualTo("22023"));
    }
    assertThat(nextOffset("pp-open", "a")).isEqualTo(2);
    // through the API the full push decides: maxSize refuses, a new partition is created
    queen.queue("pp-open").partition("new").push(Map.of("n", 1));
    assertThat(nextOffset("pp-open", "new")).isEqualTo(1);
  }

  /**
   * The full push (items with transaction ids: the idempotent producer's and the source connector's pushes) in large
   * batches over many partitions, named in shuffled order, some existing and some new in every call, with duplicates
   * of earlier calls and within the batch, twelve calls on one connection: PL/pgSQL caches a generic plan after five,
   * and the look-up, the offsets and the closing update must give the same answers under it (push finds a locked
   * partition's next offset by binary search over ids in id order, not by the items' order).
   */
  @Test
  void theFullPushKeepsEveryPartitionGaplessOverManyCallsOnOneConnection() throws SQLException {
    String q = "full-many";
    SplittableRandom random = new SplittableRandom(37);
    Map<String, Long> next = new HashMap<>();
    Map<String, Long> stored = new HashMap<>(); // partition + '/' + transaction id -> offset
    List<String> known = new ArrayList<>();
    List<String> pastTxns = new ArrayList<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select idx, status, msg_offset"
        + " from queen.push(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], false) order by idx")) {
      for (int call = 0; call < 12; call++) {
        List<String> parts = new ArrayList<>();
        List<String> txns = new ArrayList<>();
        for (int k = 0; k < 40; k++) {
          known.add("c" + call + "-" + k); // new partitions of this call, mixed in below
        }
        for (int i = 0; i < 400; i++) {
          String p = known.get(random.nextInt(known.size()));
          String t;
          int kind = random.nextInt(20);
          if (kind == 0 && !pastTxns.isEmpty()) {
            t = pastTxns.get(random.nextInt(pastTxns.size())); // a duplicate of an earlier call
            p = t.substring(0, t.indexOf('/'));
          } else if (kind == 1 && !txns.isEmpty()) {
            int j = random.nextInt(txns.size()); // a duplicate within the batch
            t = txns.get(j);
            p = parts.get(j);
          } else {
            t = p + "/t" + call + "-" + i;
          }
          parts.add(p);
          txns.add(t);
        }
        String[] payloads = new String[parts.size()];
        Arrays.fill(payloads, "{\"n\": 1}");
        st.setArray(1, c.createArrayOf("text", Collections.nCopies(parts.size(), q).toArray()));
        st.setArray(2, c.createArrayOf("text", parts.toArray()));
        st.setArray(3, c.createArrayOf("text", payloads));
        st.setArray(4, c.createArrayOf("text", txns.toArray()));
        st.setArray(5, c.createArrayOf("text", new String[parts.size()]));
        try (ResultSet r = st.executeQuery()) {
          for (int i = 0; i < parts.size(); i++) {
            assertThat(r.next()).isTrue();
            String key = txns.get(i);
            Long before = stored.get(key);
            long expected;
            if (before != null) {
              assertThat(r.getString(2)).as("call %d item %d", call, i).isEqualTo("duplicate");
              expected = before;
            } else {
              assertThat(r.getString(2)).as("call %d item %d", call, i).isEqualTo("queued");
              expected = next.merge(parts.get(i), 1L, Long::sum) - 1;
              stored.put(key, expected);
              pastTxns.add(key);
            }
            assertThat(r.getLong(3)).as("call %d item %d (%s)", call, i, parts.get(i)).isEqualTo(expected);
          }
        }
      }
    }
    // every partition's counter is what it stored, and its messages are 0 .. count - 1 without a gap
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select p.name, p.next_offset,"
        + " count(m.\"offset\"), coalesce(max(m.\"offset\"), -1) from queen.partitions p join queen.queues qq on qq.id = p.queue_id"
        + " left join queen.messages m on m.partition_id = p.id where qq.name = ? group by p.name, p.next_offset")) {
      st.setString(1, q);
      Map<String, Long> counters = new HashMap<>();
      try (ResultSet r = st.executeQuery()) {
        while (r.next()) {
          assertThat(r.getLong(3)).as(r.getString(1)).isEqualTo(r.getLong(2));
          assertThat(r.getLong(4)).as(r.getString(1)).isEqualTo(r.getLong(2) - 1);
          if (r.getLong(2) > 0) {
            counters.put(r.getString(1), r.getLong(2));
          }
        }
      }
      assertThat(counters).isEqualTo(next);
    }
  }

  /** One push_partition call of one plain (or, with a key id, sealed) message; its first offset, or null. */
  private Long pushPartition(String q, String p, String keyId) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select partition_id, first_offset"
        + " from queen.push_partition(?, ?, array[gen_random_uuid()], array['{\"n\": 1}']::text[], array[null::text],"
        + " array[gen_random_uuid()::text], null, null, ?::text[], null, null)")) {
      st.setString(1, q);
      st.setString(2, p);
      st.setString(3, keyId == null ? null : "{" + keyId + "}");
      try (ResultSet r = st.executeQuery()) {
        r.next();
        long first = r.getLong(2);
        return r.wasNull() ? null : first;
      }
    }
  }

  private long messageCount() throws SQLException {
    try (Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement();
        ResultSet r = st.executeQuery("select count(*) from queen.messages")) {
      r.next();
      return r.getLong(1);
    }
  }

  private boolean hasPending(String q) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select bool_or(c.has_pending) from"
        + " queen.cursors c join queen.queues qq on qq.id = c.queue_id where qq.name = ?")) {
      st.setString(1, q);
      try (ResultSet r = st.executeQuery()) {
        r.next();
        return r.getBoolean(1);
      }
    }
  }

  private long nextOffset(String q, String p) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select p.next_offset from"
        + " queen.partitions p join queen.queues qq on qq.id = p.queue_id where qq.name = ? and p.name = ?")) {
      st.setString(1, q);
      st.setString(2, p);
      try (ResultSet r = st.executeQuery()) {
        r.next();
        return r.getLong(1);
      }
    }
  }
}
