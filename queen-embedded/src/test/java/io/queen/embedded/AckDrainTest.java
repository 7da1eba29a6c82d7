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
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The cursors' {@code has_pending} flag while a partition is busy (pushed to in the last 100 ms). The consume
 * loop's acknowledgement that catches a cursor up clears the flag only when its partition is not busy (a consumer's
 * own acks clear it always; clearing it always made each message delivered alone flip it twice, two updates that
 * could not be HOT); a push that finds it
 * set writes nothing to the cursor; a pop's scan passes a caught-up flagged cursor of a busy partition without counting
 * it against its limit, and clears the flag once the partition is quiet, under a SHARE lock on the partition (a
 * partition a push holds keeps its flag). A pop of named partitions looks at those only. Busy and quiet are set by
 * moving the partitions' last push time, not by waiting.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AckDrainTest {

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

  /** Acknowledges as the consume loop does: a busy partition's flag is left set (a consumer's own acks clear it). */
  private static List<AckResult> loopAck(Queen queen, List<Message> got) {
    List<io.queen.embedded.internal.log.Broker.AckRequest> reqs = new ArrayList<>();
    for (Message m : got) {
      reqs.add(new io.queen.embedded.internal.log.Broker.AckRequest(m, io.queen.AckStatus.COMPLETED, null));
    }
    return ((io.queen.embedded.internal.QueenImpl) queen).broker().ack(reqs, true);
  }

  /** Makes a queue's partitions look busy (a push a moment ago) for the rest of the test, whatever the machine's pace. */
  private static void busy(DataSource ds, String queue) throws SQLException {
    lastPush(ds, queue, "now() + interval '1 hour'");
  }

  /** Makes a queue's partitions look quiet: their last push 2 seconds ago. */
  private static void quiet(DataSource ds, String queue) throws SQLException {
    lastPush(ds, queue, "now() - interval '2 seconds'");
  }

  private static void lastPush(DataSource ds, String queue, String when) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "update drain.partitions p set last_message_at = " + when + " from drain.queues q"
            + " where q.id = p.queue_id and q.name = ?")) {
      st.setString(1, queue);
      st.executeUpdate();
    }
  }

  @Test
  void anAckLeavesTheFlagsSetAndAScanClearsThemOnceTheCursorsAreQuietButNotWhereAPushHoldsThePartition(DataSource ds)
      throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        items.add(PushItem.of("p" + i, Map.of("n", i)));
      }
      queen.queue("jobs").push(items);
      List<Message> got = queen.queue("jobs").consumer().batch(10).partitions(5).pop();
      assertThat(got).hasSize(5);
      busy(ds, "jobs");
      assertThat(loopAck(queen, got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      assertThat(flagged(ds, "jobs")).containsExactly("p0", "p1", "p2", "p3", "p4");
      // busy (pushed to a moment ago): a scan finds nothing and leaves the flags
      assertThat(queen.queue("jobs").consumer().batch(10).partitions(5).pop()).isEmpty();
      assertThat(flagged(ds, "jobs")).containsExactly("p0", "p1", "p2", "p3", "p4");

      quiet(ds, "jobs");
      try (Connection pusher = ds.getConnection()) {
        // a pushing transaction holds p3's row as a push does, without having pushed anything yet
        pusher.setAutoCommit(false);
        try (PreparedStatement st = pusher.prepareStatement("select 1 from drain.partitions p join drain.queues q"
            + " on q.id = p.queue_id where q.name = 'jobs' and p.name = 'p3' for no key update")) {
          st.executeQuery().close();
        }
        assertThat(queen.queue("jobs").consumer().batch(10).partitions(5).pop()).isEmpty();
        assertThat(flagged(ds, "jobs")).containsExactly("p3");
        pusher.rollback();
      }
      assertThat(queen.queue("jobs").consumer().batch(10).partitions(5).pop()).isEmpty();
      assertThat(flagged(ds, "jobs")).isEmpty();
      // and a push after that sets the flag again
      queen.queue("jobs").partition("p1").push(Map.of("n", 5));
      assertThat(flagged(ds, "jobs")).containsExactly("p1");
      assertThat(queen.queue("jobs").consumer().batch(10).partitions(5).pop()).hasSize(1);
    }
  }

  @Test
  void aConsumersOwnAckClearsTheFlagEvenOfABusyPartition(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      queen.queue("own").push(List.of(PushItem.of("a", Map.of("n", 0)), PushItem.of("b", Map.of("n", 1))));
      List<Message> got = queen.queue("own").consumer().batch(10).partitions(2).pop();
      busy(ds, "own");
      assertThat(queen.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      assertThat(flagged(ds, "own")).isEmpty(); // its own pops scan: a flag left set would cost each of them
    }
  }

  @Test
  void anAckThatCatchesUpAQuietPartitionClearsItsFlagAtOnce(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      queen.queue("cold").push(List.of(PushItem.of("a", Map.of("n", 0)), PushItem.of("b", Map.of("n", 1))));
      List<Message> got = queen.queue("cold").consumer().batch(10).partitions(2).pop();
      quiet(ds, "cold");
      assertThat(loopAck(queen, got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      assertThat(flagged(ds, "cold")).isEmpty();
    }
  }

  @Test
  void aPushIntoAPartitionWhoseFlagIsSetWritesNothingToTheCursor(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      queen.queue("busy").partition("a").push(Map.of("n", 0));
      List<Message> got = queen.queue("busy").consumer().pop();
      busy(ds, "busy");
      loopAck(queen, got);
      String before = cursorVersion(ds, "busy", "a");
      queen.queue("busy").partition("a").push(Map.of("n", 1));
      queen.queue("busy").partition("a").push(Map.of("n", 2));
      assertThat(cursorVersion(ds, "busy", "a")).isEqualTo(before);
      assertThat(queen.queue("busy").consumer().batch(10).pop()).extracting(m -> m.payload().get("n").asInt())
          .containsExactly(1, 2);
    }
  }

  /** The cursor row's version of the default group: its ctid and xmin, which any update changes. */
  private static String cursorVersion(DataSource ds, String queue, String partition) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "select cu.ctid::text || ' ' || cu.xmin::text from drain.cursors cu join drain.partitions p on p.id = cu.partition_id"
            + " join drain.queues q on q.id = p.queue_id where q.name = ? and p.name = ?")) {
      st.setString(1, queue);
      st.setString(2, partition);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getString(1);
      }
    }
  }

  @Test
  void aScanPassesCaughtUpFlaggedCursorsWithoutCountingThem(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        items.add(PushItem.of(String.format("q%02d", i), Map.of("n", i)));
      }
      queen.queue("pass").push(items);
      List<Message> got = queen.queue("pass").consumer().batch(20).partitions(20).pop();
      busy(ds, "pass");
      loopAck(queen, got);
      assertThat(flagged(ds, "pass")).hasSize(20);
      queen.queue("pass").partition("q17").push(Map.of("n", 100));
      // one partition per pop: the 19 caught-up flagged cursors do not use up the limit
      assertThat(queen.queue("pass").consumer().partitions(1).pop())
          .singleElement().satisfies(m -> assertThat(m.partition()).isEqualTo("q17"));
    }
  }

  @Test
  void aPopOfNamedPartitionsLooksAtThoseOnlyAndThePopOfEarlierVersionsStillScans(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      queen.queue("named").push(List.of(PushItem.of("a", Map.of("n", 0)), PushItem.of("b", Map.of("n", 1)),
          PushItem.of("c", Map.of("n", 2))));
      String cols = "partition_name";
      try (Connection c = ds.getConnection()) {
        try (PreparedStatement st = c.prepareStatement("select " + cols + " from drain.pop('named', '__QUEUE_MODE__', 10,"
            + " 10, null, 30000, 'test-node', 'ALL', null, false, null, array['c', 'missing'])")) {
          assertThat(names(st)).containsExactly("c");
        }
        // eleven arguments: the call of a node of an earlier version during a rolling upgrade
        try (PreparedStatement st = c.prepareStatement("select " + cols + " from drain.pop('named', '__QUEUE_MODE__', 10,"
            + " 10, null, 30000, 'test-node', 'ALL', null, false, null)")) {
          assertThat(names(st)).containsExactlyInAnyOrder("a", "b");
        }
      }
    }
  }

  private static List<String> names(PreparedStatement st) throws SQLException {
    List<String> out = new ArrayList<>();
    try (ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  @Test
  void aPartitionThatGotMoreWhileLeasedKeepsItsFlag(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("drain").janitor(false).listen(false).start()) {
      queen.queue("more").partition("a").push(Map.of("n", 0));
      queen.queue("more").partition("b").push(Map.of("n", 0));
      List<Message> got = queen.queue("more").consumer().batch(10).partitions(2).pop();
      assertThat(got).hasSize(2);
      queen.queue("more").partition("b").push(Map.of("n", 1)); // b has more after the leased range
      busy(ds, "more");
      loopAck(queen, got);
      assertThat(flagged(ds, "more")).containsExactly("a", "b");
      List<Message> next = queen.queue("more").consumer().batch(10).partitions(2).pop();
      assertThat(next).singleElement().satisfies(m -> assertThat(m.payload().get("n").asInt()).isEqualTo(1));
    }
  }

  /**
   * One ack settling many leases finds each partition's row by its place in an array, not by a join; the
   * partitions that got more while leased are found by the next pops, ten at a time, past the caught-up ones.
   */
  @Test
  void oneAckOfManyLeasesThenPopsOfTenFindExactlyThePartitionsThatGotMore(DataSource ds) throws Exception {
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
      busy(ds, "many");
      assertThat(loopAck(queen, got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
      assertThat(flagged(ds, "many")).hasSize(n);
      List<String> rest = new ArrayList<>();
      for (int round = 0; round < 6; round++) {
        List<Message> ten = queen.queue("many").consumer().batch(10).partitions(10).pop();
        ten.forEach(m -> rest.add(m.partition()));
        queen.ack(ten);
      }
      assertThat(rest).containsExactlyInAnyOrderElementsOf(expected);
    }
  }
}
