package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.DeadLetter;
import io.queen.Message;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A dead letter redriven into a partition at the moment an ack drains that partition's cursor must stay findable: the
 * cursor's {@code has_pending} flag ends up set, whichever of the two takes the cursor row first.
 *
 * <ul>
 *   <li>The redrive first: the ack's settling statement waits for the cursor row with a snapshot taken before the
 *       redrive committed; it looks for redeliveries again afterwards, with a fresh one.
 *   <li>The drain first: the redrive takes the cursor row even though its flag still looks set, so it waits for the
 *       drain to commit and sets the flag after it.
 * </ul>
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RedriveDrainRaceTest {

  @Test
  void anAckThatWaitedForARedrivingTransactionLeavesTheFlagSet(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("race").janitor(false).listen(false).start()) {
      String q = "first";
      Message leased = deadLetterOneThenLeaseTheNext(queen, q);
      DeadLetter dl = queen.deadLetters(q).defaultGroup().list(10, null).get(0);

      try (Connection redriver = ds.getConnection()) {
        // a redrive in progress: it holds the cursor row, as DeadLetters.redrive does first
        redriver.setAutoCommit(false);
        LockWaiters.lockCursor(redriver, "race", leased);
        CompletableFuture<AckResult> ack = CompletableFuture.supplyAsync(() -> queen.ack(leased));
        LockWaiters.awaitWaiting(ds, "%.ack(%", 1, ack::isDone);
        // the rest of the redrive, then its commit, while the ack waits for the row
        try (PreparedStatement st = redriver.prepareStatement("insert into race.redeliveries(partition_id, group_name,"
            + " \"offset\") values (?, ?, ?)")) {
          st.setLong(1, leased.partitionId());
          st.setString(2, leased.consumerGroup());
          st.setLong(3, dl.offset());
          st.executeUpdate();
        }
        try (PreparedStatement st = redriver.prepareStatement("delete from race.dead_letters where id = ?")) {
          st.setLong(1, dl.id());
          st.executeUpdate();
        }
        redriver.commit();
        assertThat(ack.get(20, TimeUnit.SECONDS).outcome()).isEqualTo(AckOutcome.ACKED);
      }
      assertThat(flag(ds, leased)).as("has_pending after the ack").isTrue();
      List<Message> again = queen.queue(q).consumer().pop();
      assertThat(again).extracting(Message::offset).containsExactly(dl.offset());
    }
  }

  @Test
  void aRedriveThatMeetsADrainInFlightSetsTheFlagAfterIt(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("race").janitor(false).listen(false).start()) {
      String q = "second";
      Message leased = deadLetterOneThenLeaseTheNext(queen, q);
      DeadLetter dl = queen.deadLetters(q).defaultGroup().list(10, null).get(0);

      CompletableFuture<Boolean> redrive;
      try (Connection drainer = ds.getConnection()) {
        // an ack settling the lease and clearing the flag, not yet committed (what ack's settling update writes)
        drainer.setAutoCommit(false);
        try (PreparedStatement st = drainer.prepareStatement("update race.cursors set committed_offset = ?,"
            + " has_pending = false, lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null,"
            + " lease_to = null where partition_id = ? and group_name = ?")) {
          st.setLong(1, leased.offset());
          st.setLong(2, leased.partitionId());
          st.setString(3, leased.consumerGroup());
          assertThat(st.executeUpdate()).isEqualTo(1);
        }
        redrive = CompletableFuture.supplyAsync(() -> queen.deadLetters(q).defaultGroup().redrive(dl));
        // the redrive either waits for the row (it must) or, if it did not take the row, finishes before the drain commits
        LockWaiters.awaitWaiting(ds, "%cursors%for update%", 1, redrive::isDone);
        drainer.commit();
      }
      assertThat(redrive.get(20, TimeUnit.SECONDS)).isTrue();
      assertThat(flag(ds, leased)).as("has_pending after the redrive").isTrue();
      List<Message> again = queen.queue(q).consumer().pop();
      assertThat(again).extracting(Message::offset).containsExactly(dl.offset());
    }
  }

  /** Offset 0 dead-lettered at once, offset 1 leased: returns offset 1's message. */
  private static Message deadLetterOneThenLeaseTheNext(Queen queen, String q) {
    queen.queue(q).partition("p").push(Map.of("n", 0));
    Message first = queen.queue(q).consumer().pop().get(0);
    assertThat(queen.ack(first, AckStatus.DEAD_LETTER, "poison").outcome()).isEqualTo(AckOutcome.DEAD_LETTERED);
    queen.queue(q).partition("p").push(Map.of("n", 1));
    List<Message> next = queen.queue(q).consumer().pop();
    assertThat(next).extracting(Message::offset).containsExactly(1L);
    return next.get(0);
  }

  private static boolean flag(DataSource ds, Message m) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "select has_pending from race.cursors where partition_id = ? and group_name = ?")) {
      st.setLong(1, m.partitionId());
      st.setString(2, m.consumerGroup());
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }
}
