package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Ack, renew and release lock a call's cursors by look-ups the items drive, and then change them through one
 * scan of the call's partitions that picks out the locked cursors by key. That scan reads every group's cursor of
 * those partitions: the other groups' must come out exactly as they went in. And a cursor another transaction
 * changed while the call waited for it is settled on its newest version.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ManyLeasesTest {
  private static final int PARTITIONS = 300;

  /** Each cursor of the queue as "committed|lease|expiry", by "group partition". */
  private static Map<String, String> cursors(DataSource ds, String queue) throws SQLException {
    Map<String, String> out = new HashMap<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "select cu.group_name, p.name, cu.committed_offset, cu.lease_id, cu.lease_expires_at"
            + " from many.cursors cu join many.partitions p on p.id = cu.partition_id"
            + " join many.queues q on q.id = p.queue_id where q.name = ?")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getString(1) + " " + rs.getString(2),
              rs.getLong(3) + "|" + rs.getString(4) + "|" + rs.getString(5));
        }
      }
    }
    return out;
  }

  private static Map<String, String> ofGroup(Map<String, String> cursors, String group) {
    return cursors.entrySet().stream().filter(e -> e.getKey().startsWith(group + " "))
        .collect(Collectors.toMap(Map.Entry::getKey, Map.Entry::getValue));
  }

  /** Pushes one message to each partition and pops all of them as group "a" and as group "b": [a's, b's]. */
  private static List<List<Message>> pushAndPopTwice(Queen queen, String queue) {
    List<PushItem> items = new ArrayList<>();
    for (int i = 0; i < PARTITIONS; i++) {
      items.add(PushItem.of(String.format("p%03d", i), Map.of("n", i)));
    }
    queen.queue(queue).push(items);
    List<List<Message>> out = new ArrayList<>();
    for (String group : List.of("a", "b")) {
      List<Message> got = queen.queue(queue).group(group).subscription(SubscriptionMode.ALL)
          .batch(PARTITIONS).partitions(PARTITIONS).pop();
      assertThat(got).hasSize(PARTITIONS);
      out.add(got);
    }
    return out;
  }

  @Test
  void anAckOfManyLeasesSettlesItsGroupAndLeavesTheOtherGroupsCursorsAsTheyWere(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("many").janitor(false).listen(false).start()) {
      String queue = "acks";
      List<List<Message>> leased = pushAndPopTwice(queen, queue);
      List<Message> a = leased.get(0);
      List<Message> b = leased.get(1);
      Map<String, String> before = cursors(ds, queue);

      assertThat(queen.ack(a)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);

      Map<String, String> after = cursors(ds, queue);
      assertThat(ofGroup(after, "b")).isEqualTo(ofGroup(before, "b"));
      assertThat(ofGroup(after, "a")).hasSize(PARTITIONS).allSatisfy((k, v) -> assertThat(v).isEqualTo("0|null|null"));
      // group a has nothing left; group b still holds every lease and settles it now
      assertThat(queen.queue(queue).group("a").batch(PARTITIONS).partitions(PARTITIONS).pop()).isEmpty();
      assertThat(queen.ack(b)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      assertThat(ofGroup(cursors(ds, queue), "b")).allSatisfy((k, v) -> assertThat(v).isEqualTo("0|null|null"));
    }
  }

  @Test
  void renewAndReleaseOfManyLeasesChangeOnlyTheCallersGroup(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("many").janitor(false).listen(false).start()) {
      String queue = "leases";
      List<Message> b = pushAndPopTwice(queen, queue).get(1);
      Map<String, String> before = cursors(ds, queue);

      assertThat(call(ds, "select count(*) from many.renew(?, ?, ?::uuid[])", b)).isEqualTo(PARTITIONS);
      Map<String, String> renewed = cursors(ds, queue);
      assertThat(ofGroup(renewed, "a")).isEqualTo(ofGroup(before, "a"));
      assertThat(ofGroup(renewed, "b")).hasSize(PARTITIONS).allSatisfy((k, v) -> {
        assertThat(v).isNotEqualTo(before.get(k)); // the expiry moved: now() of a later transaction
        assertThat(v).startsWith(before.get(k).substring(0, before.get(k).lastIndexOf('|') + 1));
      });

      assertThat(call(ds, "select many.release(?, ?, ?::uuid[])", b)).isEqualTo(PARTITIONS);
      Map<String, String> released = cursors(ds, queue);
      assertThat(ofGroup(released, "a")).isEqualTo(ofGroup(before, "a"));
      assertThat(ofGroup(released, "b")).allSatisfy((k, v) -> assertThat(v).isEqualTo("-1|null|null"));
      // released, not settled: group b gets every message again
      assertThat(queen.queue(queue).group("b").batch(PARTITIONS).partitions(PARTITIONS).pop())
          .hasSize(PARTITIONS);
    }
  }

  /**
   * The consume loop renews a batch's leases while its handler acknowledges them: an ack that waits for cursors a
   * renewal rewrote settles them on the rewritten rows once the renewal commits.
   */
  @Test
  void anAckThatWaitedForARenewalSettlesTheRenewedCursors(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("many").janitor(false).listen(false).start()) {
      String queue = "race";
      List<Message> b = pushAndPopTwice(queen, queue).get(1);
      try (Connection renewer = ds.getConnection()) {
        renewer.setAutoCommit(false);
        assertThat(call(renewer, "select count(*) from many.renew(?, ?, ?::uuid[])", b)).isEqualTo(PARTITIONS);
        CompletableFuture<List<AckResult>> acked = CompletableFuture.supplyAsync(() -> queen.ack(b));
        LockWaiters.awaitWaiting(ds, "%.ack(%", 1, acked::isDone);
        assertThat(acked).isNotDone();
        renewer.commit();
        assertThat(acked.get(20, TimeUnit.SECONDS)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      }
      assertThat(ofGroup(cursors(ds, queue), "b")).hasSize(PARTITIONS)
          .allSatisfy((k, v) -> assertThat(v).isEqualTo("0|null|null"));
      assertThat(queen.queue(queue).group("b").batch(PARTITIONS).partitions(PARTITIONS).pop()).isEmpty();
      assertThat(ofGroup(cursors(ds, queue), "a")).allSatisfy((k, v) -> assertThat(v).startsWith("-1|"));
    }
  }

  private static int call(DataSource ds, String sql, List<Message> leased) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return call(c, sql, leased);
    }
  }

  private static int call(Connection c, String sql, List<Message> leased) throws SQLException {
    try (PreparedStatement st = c.prepareStatement(sql)) {
      st.setArray(1, c.createArrayOf("bigint", leased.stream().map(Message::partitionId).toArray()));
      st.setArray(2, c.createArrayOf("text", leased.stream().map(Message::consumerGroup).toArray()));
      st.setArray(3, c.createArrayOf("text", leased.stream().map(m -> m.leaseId().toString()).toArray()));
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    }
  }
}
