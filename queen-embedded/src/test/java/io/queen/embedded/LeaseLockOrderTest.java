package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Renew and release lock the cursor rows they change in key order, the order an ack locks its settled cursors
 * in. Before, they locked in the arrays' (or the table's) order, and a renewal that held a higher partition while
 * waiting for a lower one an ack held, while the ack waited for the higher one, was a deadlock that stalled both for
 * {@code deadlock_timeout}. Here a transaction holds the lower partition's cursor as an ack would, the renewal (or
 * release) is given the partitions highest first and waits, and the holder then takes the higher partition's
 * cursor: it must get it at once, because the waiting call holds nothing yet.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LeaseLockOrderTest {

  @Test
  void aRenewalGivenTheHigherPartitionFirstWaitsWithoutHoldingIt(DataSource ds) throws Exception {
    assertLocksInKeyOrder(ds, "renew", "select count(*) from lockorder.renew(?, ?, ?::uuid[])");
  }

  @Test
  void aReleaseGivenTheHigherPartitionFirstWaitsWithoutHoldingIt(DataSource ds) throws Exception {
    assertLocksInKeyOrder(ds, "release", "select lockorder.release(?, ?, ?::uuid[])");
  }

  private static void assertLocksInKeyOrder(DataSource ds, String call, String sql) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("lockorder").janitor(false).listen(false).start()) {
      queen.queue(call).push(List.of(PushItem.of("a", Map.of("n", 1)), PushItem.of("b", Map.of("n", 2))));
      List<Message> leased = queen.queue(call).consumer().batch(10).partitions(2).pop();
      assertThat(leased).hasSize(2);
      Message low = leased.stream().min(Comparator.comparingLong(Message::partitionId)).orElseThrow();
      Message high = leased.stream().max(Comparator.comparingLong(Message::partitionId)).orElseThrow();

      try (Connection holder = ds.getConnection(); Connection caller = ds.getConnection()) {
        // the lower partition's cursor row rewritten, as any ack or pop does: it now comes after the higher one in the
        // table, so neither the arrays' order (higher first) nor the table's would lock the lower one first
        try (PreparedStatement st = holder.prepareStatement(
            "update lockorder.cursors set attempts = attempts where partition_id = ?")) {
          st.setLong(1, low.partitionId());
          assertThat(st.executeUpdate()).isEqualTo(1);
        }
        holder.setAutoCommit(false);
        LockWaiters.lockCursor(holder, "lockorder", low); // as an ack that settles both partitions holds the lower one first
        CompletableFuture<Integer> result = CompletableFuture.supplyAsync(() -> {
          try (PreparedStatement st = caller.prepareStatement(sql)) {
            st.setArray(1, caller.createArrayOf("bigint", new Long[] {high.partitionId(), low.partitionId()}));
            st.setArray(2, caller.createArrayOf("text", new String[] {high.consumerGroup(), low.consumerGroup()}));
            st.setArray(3, caller.createArrayOf("text", new String[] {high.leaseId().toString(), low.leaseId().toString()}));
            try (ResultSet rs = st.executeQuery()) {
              rs.next();
              return rs.getInt(1);
            }
          } catch (SQLException e) {
            throw new IllegalStateException(call + " failed with SQLSTATE " + e.getSQLState(), e);
          }
        });
        LockWaiters.awaitWaiting(ds, "%." + call + "(%", 1, result::isDone);
        // the higher partition: free, since the waiting call locks in key order and waits for the lower one first
        try (Statement st = holder.createStatement()) {
          st.execute("set local lock_timeout = '2s'");
        }
        LockWaiters.lockCursor(holder, "lockorder", high);
        holder.commit();
        assertThat(result.get(20, TimeUnit.SECONDS)).as(call + " changed both leases once the holder committed")
            .isEqualTo(2);
      }
    }
  }
}
