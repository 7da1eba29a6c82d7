package io.queen.embedded;

import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * A rough probe, not a test (its name keeps it out of the default run; run it with {@code -Dtest=PopCostProbe}): the
 * time of a pop (+ ack) and of an empty pop over 50 partitions leased by a live node, then the same with 50 dead node
 * rows. Prints {@code FIGURE} lines; queen-embedded/README.md quotes its figures.
 */
@QueenPostgres
class PopCostProbe {
  @Test
  void measure(DataSource ds) {
    try (Queen a = EmbeddedQueen.builder().dataSource(ds).nodeId("probe-a").listen(false).start();
        Queen b = EmbeddedQueen.builder().dataSource(ds).nodeId("probe-b").listen(false).start()) {
      for (int round = 0; round < 5; round++) {
        String q = "probe" + round;
        if (round == 3) {
          try (java.sql.Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement()) {
            st.execute("insert into queen.nodes(node_id, incarnation, heartbeat_at, dead_after, session_timeout_ms)"
                + " select 'dead-' || g, gen_random_uuid(), now() - interval '1 hour', now() - interval '1 hour', 10000"
                + " from generate_series(1, 50) g");
          } catch (java.sql.SQLException e) {
            throw new IllegalStateException(e);
          }
          System.out.println("FIGURE with 50 dead node rows from here");
        }
        List<PushItem> items = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
          items.add(PushItem.of("p" + (i % 20), Map.of("n", i)));
        }
        a.queue(q).push(items);
        // 50 partitions with live leases held by b (has_pending stays set)
        List<PushItem> held = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
          held.add(PushItem.of("h" + (i % 50), Map.of("n", i)));
        }
        a.queue(q).push(held);
        int leased = 0;
        while (leased < 50) {
          List<Message> got = b.queue(q).consumer().batch(1).leaseTime(Duration.ofMinutes(5)).pop();
          if (got.isEmpty()) break;
          if (got.get(0).partition().startsWith("h")) leased++; else b.ack(got);
        }
        long popNs = 0;
        int n = 0;
        long t0 = System.nanoTime();
        while (true) {
          long s = System.nanoTime();
          List<Message> got = a.queue(q).consumer().batch(1).pop();
          popNs += System.nanoTime() - s;
          if (got.isEmpty()) break;
          a.ack(got);
          n++;
        }
        long total = System.nanoTime() - t0;
        long e0 = System.nanoTime();
        for (int i = 0; i < 2000; i++) {
          a.queue(q).consumer().batch(1).pop();
        }
        long empty = System.nanoTime() - e0;
        System.out.printf("FIGURE pop_us %.1f us (n=%d), pop+ack_us %.1f, empty_pop_over_50_leased_us %.1f%n",
            popNs / 1000.0 / n, n, total / 1000.0 / n, empty / 1000.0 / 2000);
      }
    }
  }
}
