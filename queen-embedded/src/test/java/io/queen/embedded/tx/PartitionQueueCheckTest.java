package io.queen.embedded.tx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.PushItem;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The partitions' queue is checked once per statement by triggers instead of a foreign key checked per row.
 * What the key guaranteed still holds: no partition names a missing queue (also under a push that creates partitions
 * while its queue is deleted), and deleting a queue row deletes its partitions and their cursors.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PartitionQueueCheckTest {

  private static long count(DataSource ds, String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  @Test
  void aPartitionOfAMissingQueueIsRefusedAndNothingIsStored(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("pqc1").janitor(false).start();
        Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      queen.queue("real").partition("a").push(Map.of("i", 1));
      long before = count(ds, "select count(*) from pqc1.partitions");
      assertThatThrownBy(() -> st.executeUpdate("insert into pqc1.partitions(queue_id, name)"
          + " select id, 'b' from pqc1.queues union all select -1, 'c'"))
          .isInstanceOfSatisfying(SQLException.class, e -> assertThat(e.getSQLState()).isEqualTo("23503"))
          .hasMessageContaining("queue id -1");
      assertThat(count(ds, "select count(*) from pqc1.partitions")).isEqualTo(before);
    }
  }

  @Test
  void deletingAQueueRowDeletesItsPartitionsAndTheirCursors(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("pqc2").janitor(false).start();
        Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      for (String q : List.of("keep", "drop")) {
        queen.queue(q).configure(cfg -> cfg.leaseTime(java.time.Duration.ofSeconds(30)));
        assertThat(queen.queue(q).group("g").subscription(SubscriptionMode.ALL).pop()).isEmpty();
        for (String p : List.of("a", "b", "c")) {
          queen.queue(q).partition(p).push(Map.of("p", p));
        }
      }
      assertThat(count(ds, "select count(*) from pqc2.cursors")).isEqualTo(6);
      st.executeUpdate("delete from pqc2.queues where name = 'drop'");
      assertThat(count(ds, "select count(*) from pqc2.partitions")).isEqualTo(3);
      assertThat(count(ds, "select count(*) from pqc2.cursors")).isEqualTo(3);
      assertThat(count(ds, "select count(*) from pqc2.partitions p join pqc2.queues q on q.id = p.queue_id"
          + " where q.name = 'keep'")).isEqualTo(3);
    }
  }

  @Test
  void aPushCreatingPartitionsWhileItsQueueIsDeletedLeavesNoPartitionWithoutItsQueue(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("pqc3").janitor(false).start()) {
      int stored = 0;
      int refused = 0;
      for (int round = 0; round < 20; round++) {
        String q = "race" + round;
        queen.queue(q).partition("seed").push(Map.of("i", 0));
        List<PushItem> items = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
          items.add(PushItem.to(q, "p" + i, Map.of("i", i)).transactionId("t" + i));
        }
        CompletableFuture<Boolean> push = CompletableFuture.supplyAsync(() -> {
          try {
            queen.queue(q).push(items);
            return true;
          } catch (RuntimeException e) {
            return false; // the queue was deleted under it: refused (23503) or pushed and then deleted
          }
        });
        queen.queue(q).delete();
        if (push.get(30, TimeUnit.SECONDS)) {
          stored++;
        } else {
          refused++;
        }
        assertThat(count(ds, "select count(*) from pqc3.partitions p where not exists"
            + " (select 1 from pqc3.queues q where q.id = p.queue_id)")).as("round %d", round).isZero();
      }
      // every round ended with no partition without its queue, whichever of the two went first
      assertThat(stored + refused).isEqualTo(20);
      assertThat(count(ds, "select count(*) from pqc3.cursors c where not exists"
          + " (select 1 from pqc3.partitions p where p.id = c.partition_id)")).isZero();
    }
  }
}
