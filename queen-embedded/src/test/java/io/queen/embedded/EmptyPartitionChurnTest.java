package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Json;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Partitions removed and made anew while they are pushed to and consumed: nothing lost, nothing twice, each producer's
 * order kept per partition. Four producers push into 100 partitions, each through another path (one-partition pushes,
 * batches over several partitions, caller transaction ids, transaction bundles), about once a second per partition,
 * so that partitions fall empty and fill again; a consume loop takes everything; the queue's {@code completedRetention}
 * (1 s) removes what was consumed; and a churn thread calls {@code remove_empty_partitions} on every partition of the
 * queue with no idle time at all, over and over, so removals meet pushes between their look-ups and their locks. At
 * the end every pushed item was handled exactly once.
 */
@QueenPostgres
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class EmptyPartitionChurnTest {
  private static final String S = "churn";
  private static final String Q = "c";
  private static final int PARTITIONS = 100;
  private static final Duration RUN = Duration.ofSeconds(12);

  @Test
  void pushesAndConsumersMeetRemovalsAndLoseNothing(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema(S).janitor(false).listen(false).start()) {
      queen.queue(Q).configure(c -> c.completedRetention(Duration.ofSeconds(1)));
      Map<String, Integer> handled = new ConcurrentHashMap<>();
      Map<String, Long> lastSeq = new ConcurrentHashMap<>(); // per producer and partition: the last seq handled
      List<String> outOfOrder = java.util.Collections.synchronizedList(new ArrayList<>());
      AtomicLong pushed = new AtomicLong();
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong removed = new AtomicLong();

      try (Subscription sub = queen.queue(Q).consumer().concurrency(4).batch(5).consume(m -> {
        String producer = m.payload().get("producer").asText();
        long seq = m.payload().get("seq").asLong();
        handled.merge(producer + "/" + seq, 1, Integer::sum);
        String key = producer + "/" + m.partition();
        Long before = lastSeq.put(key, seq);
        if (before != null && before >= seq) {
          outOfOrder.add(key + ": " + before + " then " + seq);
        }
      })) {
        ExecutorService pool = Executors.newFixedThreadPool(5);
        List<Future<?>> tasks = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
          int producer = t;
          tasks.add(pool.submit(() -> {
            long seq = 0;
            while (!stop.get()) {
              List<PushItem> items = new ArrayList<>();
              int n = producer == 1 ? 3 : 1;
              for (int i = 0; i < n; i++) {
                String partition = "p" + ThreadLocalRandom.current().nextInt(PARTITIONS);
                seq++;
                PushItem it = PushItem.to(Q, partition,
                    Json.of("{\"producer\":\"t" + producer + "\",\"seq\":" + seq + "}"));
                items.add(producer == 2 ? it.transactionId("t2-" + seq) : it);
              }
              if (producer == 3) {
                var tx = queen.transaction();
                items.forEach(tx::push);
                tx.commit();
              } else {
                queen.push(items);
              }
              pushed.addAndGet(n);
              sleepQuietly(ThreadLocalRandom.current().nextInt(1, 40));
            }
            return null;
          }));
        }
        tasks.add(pool.submit(() -> {
          while (!stop.get()) {
            queen.runRetentionNow();
            try (Connection c = ds.getConnection(); Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("select coalesce(sum(removed), 0) from " + S + ".remove_empty_partitions("
                    + "array(select id from " + S + ".partitions), 0)")) {
              rs.next();
              removed.addAndGet(rs.getLong(1));
            }
            sleepQuietly(20);
          }
          return null;
        }));
        Thread.sleep(RUN.toMillis());
        stop.set(true);
        for (Future<?> f : tasks) {
          f.get(60, TimeUnit.SECONDS);
        }
        pool.shutdown();
        await().atMost(Duration.ofSeconds(60)).until(() -> handled.size() == pushed.get());
      }
      assertThat(handled).hasSize((int) pushed.get());
      assertThat(handled.values()).as("every item handled once").allMatch(n -> n == 1);
      assertThat(outOfOrder).as("each producer's items in order per partition").isEmpty();
      assertThat(removed.get()).as("partitions removed while pushed to").isGreaterThan(PARTITIONS);
      System.out.printf("churn: %d items pushed and handled once, %d partition removals%n", pushed.get(), removed.get());
    }
  }

  private static void sleepQuietly(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
