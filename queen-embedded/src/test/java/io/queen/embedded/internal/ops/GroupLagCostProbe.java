package io.queen.embedded.internal.ops;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.internal.QueenImpl;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Not a test: measures what the group gauges cost at 100,000 partitions (run it by name:
 * {@code -Dtest=GroupLagCostProbe}). One queue, 100,000 partitions of one message each, groups "idle" (at the end
 * of every partition) and "busy" (behind on 10 % or 100 % of them), built by SQL; then the gauge read
 * ({@link StatusReader#lag}) and a retention pass that finds nothing to remove are timed.
 */
@QueenPostgres
@Timeout(value = 10, unit = TimeUnit.MINUTES)
class GroupLagCostProbe {

  @Test
  void probe(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      QueenImpl node = (QueenImpl) queen;
      queen.queue("wide").configure(c -> c.retention(java.time.Duration.ofDays(30)));
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute("insert into queen.partitions(queue_id, name, next_offset) select q.id, 'p' || g, 1"
            + " from queen.queues q, generate_series(1, 100000) g where q.name = 'wide'");
        st.execute("insert into queen.messages(partition_id, \"offset\", id, payload)"
            + " select p.id, 0, gen_random_uuid(), '{}'::jsonb from queen.partitions p");
        st.execute("insert into queen.consumer_groups(queue_id, name, mode) select id, g, 'ALL' from queen.queues,"
            + " unnest(array['idle', 'busy']) g where name = 'wide'");
        st.execute("insert into queen.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)"
            + " select p.id, 'idle', p.queue_id, 0, false from queen.partitions p");
        st.execute("insert into queen.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)"
            + " select p.id, 'busy', p.queue_id, case when p.id % 10 = 0 then -1 else 0 end, p.id % 10 = 0"
            + " from queen.partitions p");
        st.execute("analyze");
      }
      StatusReader reader = new StatusReader(ds, "queen", java.util.Set.of());
      time("lag, 10% of 100,000 partitions behind", reader);
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute("update queen.cursors set committed_offset = -1, has_pending = true where group_name = 'busy'");
        st.execute("analyze");
      }
      time("lag, all 100,000 partitions behind", reader);
      for (int i = 0; i < 3; i++) {
        long t0 = System.nanoTime();
        queen.runRetentionNow();
        System.out.printf("PROBE retention pass over 100,000 partitions, nothing to remove: %d ms%n",
            (System.nanoTime() - t0) / 1_000_000);
      }
      long t0 = System.nanoTime();
      queen.status();
      System.out.printf("PROBE status(): %d ms%n", (System.nanoTime() - t0) / 1_000_000);
    }
  }

  private static void time(String what, StatusReader reader) {
    long best = Long.MAX_VALUE;
    long sum = 0;
    for (int i = 0; i < 7; i++) {
      long t0 = System.nanoTime();
      reader.lag();
      long t = System.nanoTime() - t0;
      if (i >= 2) {
        sum += t;
        best = Math.min(best, t);
      }
    }
    System.out.printf("PROBE %s: best %d ms, mean %d ms (5 runs after 2 warm-ups)%n", what, best / 1_000_000,
        sum / 5 / 1_000_000);
  }
}
