package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Groups deleted while producers create partitions leave nothing of theirs behind. A push that creates a partition
 * inserts one cursor per group it sees, in a statement after the partition's; a delete that did not take the queue
 * row first could pass before that cursor was committed, and the cursor (at offset -1, of a group no one reads) held
 * the partition's messages from retention for good (a soak that deleted 1,185 groups under a producer making a
 * partition per order would leave thousands of such cursors, retention held by groups that no longer exist).
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class DeleteGroupRaceTest {

  @Test
  void groupsDeletedWhilePushesCreatePartitionsLeaveNoCursors(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("deleter").janitor(false).start()) {
      queen.queue("orders").push(Map.of("first", true));
      AtomicBoolean run = new AtomicBoolean(true);
      AtomicLong pushed = new AtomicLong();
      Thread[] producers = new Thread[3];
      for (int t = 0; t < producers.length; t++) {
        producers[t] = new Thread(() -> {
          while (run.get()) { // a new partition per order
            queen.queue("orders").partition(UUID.randomUUID().toString()).push(Map.of("amount", 1));
            pushed.incrementAndGet();
          }
        }, "producer-" + t);
        producers[t].start();
      }
      try {
        for (int i = 0; i < 60; i++) {
          queen.queue("orders").group("tmp-" + i).subscription(SubscriptionMode.NEW).pop(); // subscribes the group
          queen.queue("orders").group("tmp-" + i).delete();
        }
      } finally {
        run.set(false);
        for (Thread p : producers) {
          p.join(10_000);
        }
      }
      assertThat(pushed.get()).as("the producers ran meanwhile").isGreaterThan(100);
      try (Connection c = ds.getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("select count(*) from queen.cursors cu where not exists (select 1 from"
              + " queen.consumer_groups g where g.queue_id = cu.queue_id and g.name = cu.group_name)")) {
        rs.next();
        assertThat(rs.getLong(1)).as("cursors of deleted groups").isZero();
      }
      assertThat(queen.status().queue("orders").groups()).isEmpty();
    }
  }
}
