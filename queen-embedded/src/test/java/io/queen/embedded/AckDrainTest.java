package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * V26: an acknowledgement that drains several partitions clears their cursors' {@code has_pending} flags in one
 * statement, with the rules refresh_pending had for each: cleared only under a SHARE lock on the partition, taken
 * with SKIP LOCKED, so a partition a push holds keeps its flag (and the next pop clears it if nothing came).
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AckDrainTest {

  private static List<String> flagged(DataSource ds) throws SQLException {
    return flagged(ds, null);
  }

  /** The names of the partitions whose cursors have the flag set, of one queue (or of all when {@code queue} is null). */
  private static List<String> flagged(DataSource ds, String queue) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "select p.name from drain.cursors cu join drain.partitions p on p.id = cu.partition_id"
            + " join drain.queues q on q.id = p.queue_id where cu.has_pending and (?::text is null or q.name = ?)"
            + " order by p.name")) {
      st.setString(1, queue);
      st.setString(2, queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getString(1));
        }
      }
    }
    return out;
  }

  @Test
  void oneAckDrainingFivePartitionsClearsEveryFlagButTheOneAPushHolds(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        items.add(PushItem.of("p" + i, Map.of("n", i)));
      }
      queen.queue("jobs").push(items);
      List<Message> got = queen.queue("jobs").consumer().batch(10).partitions(5).pop();
      assertThat(got).hasSize(5);
      assertThat(flagged(ds)).containsExactly("p0", "p1", "p2", "p3", "p4");

      try (Connection pusher = ds.getConnection()) {
        // a pushing transaction holds p3's row as a push does, without having pushed anything yet
        pusher.setAutoCommit(false);
        try (PreparedStatement st = pusher.prepareStatement("select 1 from drain.partitions p join drain.queues q"
            + " on q.id = p.queue_id where q.name = 'jobs' and p.name = 'p3' for no key update")) {
          st.executeQuery().close();
        }
        List<AckResult> results = queen.ack(got);
        assertThat(results).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
        assertThat(flagged(ds)).containsExactly("p3");
        pusher.rollback();
      }
      // the flag left set costs one empty look: the next pop finds nothing and clears it
      assertThat(queen.queue("jobs").consumer().batch(10).partitions(5).pop()).isEmpty();
      assertThat(flagged(ds)).isEmpty();
      // and a push after the drain sets the flag again
      queen.queue("jobs").partition("p1").push(Map.of("n", 5));
      assertThat(flagged(ds)).containsExactly("p1");
      assertThat(queen.queue("jobs").consumer().batch(10).partitions(5).pop()).hasSize(1);
    }
  }

  @Test
  void aPartitionThatGotMoreWhileLeasedKeepsItsFlag(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      queen.queue("more").partition("a").push(Map.of("n", 0));
      queen.queue("more").partition("b").push(Map.of("n", 0));
      List<Message> got = queen.queue("more").consumer().batch(10).partitions(2).pop();
      assertThat(got).hasSize(2);
      queen.queue("more").partition("b").push(Map.of("n", 1)); // b has more after the leased range
      queen.ack(got);
      assertThat(flagged(ds, "more")).containsExactly("b");
      List<Message> next = queen.queue("more").consumer().batch(10).partitions(2).pop();
      assertThat(next).singleElement().satisfies(m -> assertThat(m.payload().get("n").asInt()).isEqualTo(1));
    }
  }

  /**
   * V35: one ack settling many leases finds each partition's locked row by its place in an array, not by a join; the
   * flags cleared are exactly those of the partitions it drained.
   */
  @Test
  void oneAckOfManyLeasesClearsTheFlagsOfExactlyThePartitionsItDrained(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      int n = 400;
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        items.add(PushItem.of(String.format("m%03d", i), Map.of("n", i)));
      }
      queen.queue("many").push(items);
      List<Message> got = queen.queue("many").consumer().batch(n).partitions(n).pop();
      assertThat(got).hasSize(n);
      List<PushItem> more = new ArrayList<>();
      List<String> expected = new ArrayList<>();
      for (int i = 0; i < n; i += 7) {
        more.add(PushItem.of(String.format("m%03d", i), Map.of("n", n + i)));
        expected.add(String.format("m%03d", i));
      }
      queen.queue("many").push(more);
      assertThat(queen.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      assertThat(flagged(ds, "many")).containsExactlyElementsOf(expected);
      List<Message> rest = queen.queue("many").consumer().batch(n).partitions(n).pop();
      assertThat(rest).hasSize(expected.size());
      queen.ack(rest); // nothing flagged is left behind for the other tests of the schema
      assertThat(flagged(ds, "many")).isEmpty();
    }
  }
}
