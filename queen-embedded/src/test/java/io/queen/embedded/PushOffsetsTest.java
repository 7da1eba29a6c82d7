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
 * The common push (existing partitions, unbounded queues, generated transaction ids, {@code push_fast}): gapless offsets
 * as reported under concurrent pushes that share partitions, and the cursor flag a consumer cleared set again.
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
