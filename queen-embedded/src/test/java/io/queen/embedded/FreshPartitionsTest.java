package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.internal.QueenImpl;
import io.queen.embedded.internal.log.Broker;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A partition per key, with one change or a few close together (the source connector's shape), drained by the consume
 * loop. The loop's ack that drains a partition whose pushes all came within a second of the one that created it
 * clears its cursor's flag, even when the last push was a moment ago: only a partition pushed to for a second or more
 * is busy and keeps it. Were they busy, every such partition the loop drains within 100 ms of its last push
 * would keep a flag, the scans would clear them some 68 per pop, and a message no wake-up named would wait for the
 * scans to get through them: tens of seconds at 500 new partitions a second. "A moment ago" and "for a second" are
 * set by moving the partitions' times, not by racing the clock.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class FreshPartitionsTest {
  private static final Duration SOON = Duration.ofSeconds(5);

  @Test
  void theLoopsAckClearsTheFlagOfAPartitionPushedToForLessThanASecond(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("fresh").janitor(false).listen(false).start()) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        items.add(PushItem.of("f" + i, Map.of("n", i)));
      }
      queen.queue("first").push(items); // five partitions, created by this push
      queen.queue("first").partition("twice").push(Map.of("n", 10));
      queen.queue("first").partition("twice").push(Map.of("n", 11)); // an insert and an update right after it
      queen.queue("first").partition("busy").push(Map.of("n", 20));
      queen.queue("first").partition("busy").push(Map.of("n", 21));
      List<Message> got = queen.queue("first").consumer().batch(10).partitions(10).pop();
      assertThat(got).hasSize(9);
      pushedAMomentAgo(ds, "first");
      // "busy" was created two seconds before its last push
      exec(ds, "update fresh.partitions p set created_at = p.last_message_at - interval '2 seconds' from fresh.queues q"
          + " where q.id = p.queue_id and q.name = ? and p.name = 'busy'", "first");
      assertThat(loopAck(queen, got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      assertThat(flagged(ds, "first")).containsExactly("busy");
    }
  }

  /**
   * The consume loop drains 3,000 partitions of one message each that look pushed a moment ago, then they fall quiet;
   * a transaction Queen owns pushes into 200 new partitions at once (a source bundle: more names than a pop looks up
   * with four workers, so the loop scans), and an application's transaction into one more (a wake-up that names
   * nothing). Every one of them arrives within a few seconds, with a poll interval of half a second and a lease of a
   * minute: no message waits for the scans to clear flags, nor for a lease.
   */
  @Test
  void messagesNoWakeUpNamesAreFoundAtOnceAfterTheLoopDrainedThousandsOfFreshPartitions(DataSource ds)
      throws Exception {
    String q = "keys";
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("fresh").nodeId("fresh-drain").janitor(false)
        .start()) {
      queen.queue(q).configure(c -> c.leaseTime(Duration.ofMinutes(1)));
      int drained = 3_000;
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < drained; i++) {
        items.add(PushItem.of(String.format("k%05d", i), Map.of("n", i)));
      }
      queen.queue(q).push(items);
      pushedAMomentAgo(ds, q); // as the loop finds them while a source streams: drained right after their push
      Set<String> seen = ConcurrentHashMap.newKeySet();
      try (Subscription s = queen.queue(q).consumer().concurrency(4).consume((Message m) -> seen.add(m.partition()))) {
        await().atMost(Duration.ofSeconds(60)).until(() -> seen.size() == drained);
      }
    }
    quietSince(ds, q, "2 seconds"); // the scans may clear flags now, of partitions whose push was all they got
    // another node: its scans start at the queue's first partition, before the drained ones, as a running loop's scans
    // stay behind the partitions its named pops drained (a scan goes on from where the node's last scan took something)
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("fresh").nodeId("fresh-loop").janitor(false)
        .pollInterval(Duration.ofMillis(500)).start()) {
      Set<String> seen = ConcurrentHashMap.newKeySet();
      try (Subscription s = queen.queue(q).consumer().concurrency(4).consume((Message m) -> seen.add(m.partition()))) {
        io.queen.Transaction bundle = queen.transaction();
        Set<String> expected = ConcurrentHashMap.newKeySet();
        for (int i = 0; i < 200; i++) {
          String p = String.format("b%05d", i);
          bundle.push(q, p, Map.of("n", i));
          expected.add(p);
        }
        assertThat(bundle.commit().success()).isTrue();
        try (Connection c = ds.getConnection()) {
          c.setAutoCommit(false);
          assertThat(queen.transaction().push(q, "app", Map.of("n", 0)).commit(c).success()).isTrue();
          c.commit();
        }
        expected.add("app");
        await().atMost(SOON).until(() -> seen.containsAll(expected));
        assertThat(s.leaseLost()).isZero();
      }
    }
  }

  /** Acknowledges as the consume loop does (the {@code has_pending} flag of a busy partition is left set). */
  private static List<AckResult> loopAck(Queen queen, List<Message> got) {
    List<Broker.AckRequest> reqs = new ArrayList<>();
    for (Message m : got) {
      reqs.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
    }
    return ((QueenImpl) queen).broker().ack(reqs, true);
  }

  /**
   * Moves the queue's partitions' creation and last push an hour ahead, so they look pushed a moment ago for the rest
   * of the test whatever the machine's pace; a partition whose last push was its creating one stays so.
   */
  private static void pushedAMomentAgo(DataSource ds, String queue) throws SQLException {
    shift(ds, queue, "interval '1 hour'");
  }

  /** Moves the queue's partitions' times so that their last push was {@code ago} before now, keeping their order. */
  private static void quietSince(DataSource ds, String queue, String ago) throws SQLException {
    exec(ds, "update fresh.partitions p set created_at = now() - interval '" + ago + "' - (p.last_message_at"
        + " - p.created_at), last_message_at = now() - interval '" + ago + "' from fresh.queues q where q.id = p.queue_id"
        + " and q.name = ?", queue);
  }

  private static void shift(DataSource ds, String queue, String by) throws SQLException {
    exec(ds, "update fresh.partitions p set created_at = p.created_at + " + by + ", last_message_at ="
        + " p.last_message_at + " + by + " from fresh.queues q where q.id = p.queue_id and q.name = ?", queue);
  }

  private static void exec(DataSource ds, String sql, String queue) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(sql)) {
      st.setString(1, queue);
      st.executeUpdate();
    }
  }

  /** The names of the queue's partitions whose cursors have the flag set. */
  private static List<String> flagged(DataSource ds, String queue) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "select p.name from fresh.cursors cu join fresh.partitions p on p.id = cu.partition_id"
            + " join fresh.queues q on q.id = p.queue_id where cu.has_pending and q.name = ? order by p.name")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getString(1));
        }
      }
    }
    return out;
  }
}
