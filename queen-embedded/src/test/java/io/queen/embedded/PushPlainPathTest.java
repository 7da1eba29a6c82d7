package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
import java.sql.Statement;
import java.util.ArrayList;
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
 * The common push (existing partitions, unbounded queues, generated transaction ids) as plain statements in one implicit
 * transaction, without a function call: what it stores, that it needs neither {@code push} nor {@code push_fast}, that
 * it hands out gapless offsets under concurrency, and that it flags the cursors a consumer cleared.
 */
@QueenPostgres
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PushPlainPathTest {
  private static final String PUSH = "queen.push(text[], text[], jsonb[], text[], text[], boolean, uuid[], text[], int[], text[])";
  private static final String PUSH_FAST =
      "queen.push_fast(text[], text[], int[], int[], uuid[], jsonb[], text[], text[], text[], int[], text[])";

  private DataSource ds;
  private Queen queen;

  @BeforeEach
  void start(DataSource ds) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("plain").start();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  @Test
  void aPushToExistingPartitionsCallsNoFunction() throws Exception {
    String q = "plain-nofn";
    queen.queue(q).push(List.of(PushItem.of("a", Map.of("n", 0)), PushItem.of("b", Map.of("n", 1))));
    List<PushResult> rs;
    execute("alter function " + PUSH + " rename to push_parked");
    execute("alter function " + PUSH_FAST + " rename to push_fast_parked");
    try {
      rs = queen.queue(q).push(List.of(PushItem.of("b", Map.of("n", 2)), PushItem.of("a", Map.of("n", 3)),
          PushItem.of("b", Map.of("n", 4)), PushItem.of("a", "five").traceId("t-5")));
      // a new partition needs the full push, which is not there: the fast statements changed nothing
      assertThatThrownBy(() -> queen.queue(q).push(List.of(PushItem.of("a", Map.of("n", 6)), PushItem.of("new", Map.of("n", 7)))))
          .hasMessageContaining("push");
    } finally {
      execute("alter function queen.push_parked(text[], text[], jsonb[], text[], text[], boolean, uuid[], text[], int[], text[])"
          + " rename to push");
      execute("alter function queen.push_fast_parked(text[], text[], int[], int[], uuid[], jsonb[], text[], text[], text[],"
          + " int[], text[]) rename to push_fast");
    }
    assertThat(rs).extracting(PushResult::status).containsOnly(PushStatus.QUEUED);
    assertThat(rs).extracting(PushResult::partition).containsExactly("b", "a", "b", "a");
    assertThat(rs).extracting(PushResult::offset).containsExactly(1L, 1L, 2L, 2L);
    for (PushResult r : rs) {
      assertThat(r.transactionId()).isEqualTo(r.messageId().toString());
    }
    assertThat(stored(q)).containsExactly("a/0 {\"n\": 0}", "a/1 {\"n\": 3}", "a/2 \"five\"", "b/0 {\"n\": 1}",
        "b/1 {\"n\": 2}", "b/2 {\"n\": 4}");
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet r = st.executeQuery("select m.trace_id, p.next_offset from queen.messages m join queen.partitions p on"
            + " p.id = m.partition_id join queen.queues qq on qq.id = p.queue_id where qq.name = '" + q + "' and p.name = 'a'"
            + " and m.\"offset\" = 2")) {
      assertThat(r.next()).isTrue();
      assertThat(r.getString(1)).isEqualTo("t-5");
      assertThat(r.getLong(2)).isEqualTo(3);
    }
    // and with the functions back, the refused batch goes through the full push
    List<PushResult> again = queen.queue(q).push(List.of(PushItem.of("a", Map.of("n", 6)), PushItem.of("new", Map.of("n", 7))));
    assertThat(again).extracting(PushResult::offset).containsExactly(3L, 0L);
  }

  @Test
  void aPushFlagsTheCursorThatAConsumerCleared() throws Exception {
    String q = "plain-flag";
    queen.queue(q).partition("p").push(Map.of("n", 0));
    List<Message> got = queen.queue(q).consumer().batch(10).pop();
    assertThat(got).hasSize(1);
    queen.ack(got);
    assertThat(queen.queue(q).consumer().batch(10).pop()).isEmpty(); // finds nothing: clears has_pending
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

  private void execute(String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  private List<String> stored(String q) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select p.name || '/' || m.\"offset\""
        + " || ' ' || m.payload::text from queen.messages m join queen.partitions p on p.id = m.partition_id"
        + " join queen.queues qq on qq.id = p.queue_id where qq.name = ? order by p.name, m.\"offset\"")) {
      st.setString(1, q);
      try (ResultSet r = st.executeQuery()) {
        while (r.next()) {
          out.add(r.getString(1));
        }
      }
    }
    return out;
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
