package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Two nodes (two {@link Queen} instances with their own pools on one database), four workers each, one
 * or two consumer groups over 200 partitions while a producer pushes 20,000 messages in batches: every
 * partition is handled in offset order (0, 1, 2, ... with nothing repeated or skipped) and every message
 * exactly once per group.
 */
@QueenPostgres
class OrderingIT {
  private static final Logger LOG = LoggerFactory.getLogger(OrderingIT.class);
  private static final int PARTITIONS = 200;
  private static final int MESSAGES = 20_000;
  private static final int PUSH_BATCH = 100;
  private static final int WORKERS = 4;

  private E2e.Nodes nodes;

  @AfterEach
  void closeAll() throws Exception {
    if (nodes != null) {
      nodes.close();
    }
  }

  private Queen node(TestDatabase db, String id) {
    if (nodes == null) {
      nodes = new E2e.Nodes(db, 12);
    }
    return nodes.node(id);
  }

  @Test
  @Timeout(value = 150, unit = TimeUnit.SECONDS)
  void oneGroupOnTwoNodesSeesEveryPartitionInOrderAndEveryMessageOnce(TestDatabase db) throws Exception {
    String q = "orders-one";
    Queen a = node(db, "a");
    Queen b = node(db, "b");
    E2e.Recorder rec = new E2e.Recorder();
    Map<Long, Integer> lastN = new ConcurrentHashMap<>();
    List<String> pushOrder = Collections.synchronizedList(new ArrayList<>());
    for (Queen node : List.of(a, b)) {
      Subscription s = node.queue(q).consumer().concurrency(WORKERS).batch(10).consume(m -> {
        rec.record(m);
        checkPushOrder(lastN, pushOrder, m.partitionId(), m.payload().get("n").asInt(), m.partition());
      });
      nodes.closeLater(s);
    }

    long started = System.nanoTime();
    Set<UUID> pushed = produce(a, q, List.of()).get(60, TimeUnit.SECONDS);
    within(Duration.ofSeconds(90)).until(() -> rec.total.get() >= MESSAGES && lag(a, q, Queen.DEFAULT_GROUP) == 0);
    LOG.info("one group: {} messages over {} partitions handled by 2 nodes x {} workers in {} ms", MESSAGES, PARTITIONS,
        WORKERS, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
    closeAll(); // stop the consumers before counting, so a late redelivery would be counted too

    assertThat(pushed).hasSize(MESSAGES);
    assertThat(rec.violations).as("per-partition offset order").isEmpty();
    assertThat(pushOrder).as("per-partition push order").isEmpty();
    assertThat(rec.duplicates()).as("messages handled more than once").isEmpty();
    assertThat(rec.seen.keySet()).as("handled ids").isEqualTo(pushed);
    assertThat(rec.total.get()).isEqualTo(MESSAGES);
    assertThat(rec.lastOffset).hasSize(PARTITIONS);
  }

  @Test
  @Timeout(value = 200, unit = TimeUnit.SECONDS)
  void twoGroupsAtOnceEachSeeEveryMessageOnceInOrder(TestDatabase db) throws Exception {
    String q = "orders-two";
    List<String> groups = List.of("billing", "shipping");
    Queen a = node(db, "a2");
    Queen b = node(db, "b2");
    Map<String, E2e.Recorder> recs = new ConcurrentHashMap<>();
    for (String g : groups) {
      E2e.Recorder rec = new E2e.Recorder();
      recs.put(g, rec);
      for (Queen node : List.of(a, b)) {
        Subscription s = node.queue(q).group(g).subscription(SubscriptionMode.ALL).concurrency(WORKERS).batch(10)
            .consume(rec::record);
        nodes.closeLater(s);
      }
    }

    long started = System.nanoTime();
    Set<UUID> pushed = produce(b, q, groups).get(60, TimeUnit.SECONDS);
    within(Duration.ofSeconds(150)).until(() -> groups.stream()
        .allMatch(g -> recs.get(g).total.get() >= MESSAGES && lag(a, q, g) == 0));
    LOG.info("two groups: {} messages x 2 groups handled by 2 nodes x {} workers per group in {} ms", MESSAGES, WORKERS,
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
    closeAll();

    assertThat(pushed).hasSize(MESSAGES);
    for (String g : groups) {
      E2e.Recorder rec = recs.get(g);
      assertThat(rec.violations).as("per-partition offset order of group %s", g).isEmpty();
      assertThat(rec.duplicates()).as("messages handled more than once by group %s", g).isEmpty();
      assertThat(rec.seen.keySet()).as("ids handled by group %s", g).isEqualTo(pushed);
      assertThat(rec.total.get()).as("deliveries to group %s", g).isEqualTo(MESSAGES);
    }
  }

  /**
   * Pushes {@link #MESSAGES} messages in batches of {@link #PUSH_BATCH} to random partitions from one
   * thread, while the consumers run; returns the pushed ids. Payload {@code n} grows with push order.
   */
  private static CompletableFuture<Set<UUID>> produce(Queen queen, String q, List<String> groups) {
    return CompletableFuture.supplyAsync(() -> {
      Random rnd = new Random(42);
      Set<UUID> ids = ConcurrentHashMap.newKeySet();
      int n = 0;
      while (n < MESSAGES) {
        List<PushItem> batch = new ArrayList<>(PUSH_BATCH);
        for (int i = 0; i < PUSH_BATCH && n < MESSAGES; i++, n++) {
          String p = "p" + rnd.nextInt(PARTITIONS);
          batch.add(PushItem.of(p, Map.of("n", n, "p", p)));
        }
        for (PushResult r : queen.queue(q).push(batch)) {
          ids.add(r.messageId());
        }
      }
      LOG.info("pushed {} messages in batches of {}", MESSAGES, PUSH_BATCH);
      return ids;
    });
  }

  /** The producer is one thread, so within a partition {@code n} must grow with the offset. */
  private static void checkPushOrder(Map<Long, Integer> lastN, List<String> problems, long pid, int n, String p) {
    lastN.compute(pid, (k, last) -> {
      if (last != null && n <= last) {
        problems.add("partition " + p + ": n " + n + " after " + last);
      }
      return last == null ? n : Math.max(last, n);
    });
  }
}
