package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The pop finds ready partitions in partition id order, starting after the last partition this node's previous
 * pop of the queue and group took and wrapping around, instead of oldest pick first; the ready index holds no column
 * the pop writes, so the lease is a HOT update.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PopRotationTest {

  @Test
  void everyReadyPartitionGetsItsTurnBeforeAnyGetsASecond(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("turns").janitor(false).listen(false).start()) {
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 60; i++) {
        items.add(PushItem.of("p" + (i % 12), Map.of("n", i)));
      }
      queen.queue("jobs").push(items);
      for (int round = 0; round < 5; round++) {
        Set<String> partitions = new HashSet<>();
        for (int i = 0; i < 12; i++) {
          List<Message> got = queen.queue("jobs").consumer().batch(1).pop();
          assertThat(got).hasSize(1);
          partitions.add(got.get(0).partition());
          queen.ack(got);
        }
        assertThat(partitions).as("round %d", round).hasSize(12);
      }
      assertThat(queen.queue("jobs").consumer().batch(1).pop()).isEmpty();
    }
  }

  @Test
  void aPopTakingSeveralPartitionsWrapsAroundToTheFirst(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("wrap").janitor(false).listen(false).start()) {
      for (String p : List.of("a", "b", "c", "d", "e")) { // partition ids in this order
        queen.queue("jobs").partition(p).push(Map.of("n", 1));
      }
      List<Message> first = queen.queue("jobs").consumer().batch(3).partitions(3).pop();
      assertThat(first).extracting(Message::partition).containsExactly("a", "b", "c");
      queen.ack(first);
      queen.queue("jobs").partition("a").push(Map.of("n", 2));
      // after c: d and e, then around to a
      List<Message> second = queen.queue("jobs").consumer().batch(3).partitions(3).pop();
      assertThat(second).extracting(Message::partition).containsExactly("d", "e", "a");
    }
  }

  @Test
  void theReadyIndexHoldsNoColumnThePopWrites(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("ready").janitor(false).start();
        Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select pg_get_indexdef('ready.cursors_ready'::regclass)")) {
      rs.next();
      assertThat(rs.getString(1)).endsWith("(queue_id, group_name, partition_id) WHERE has_pending");
    }
  }
}
