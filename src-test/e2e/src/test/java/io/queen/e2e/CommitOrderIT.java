package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.ConsumerBuilder;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The commit-order hole: with offsets taken from a clock or a sequence, two concurrent pushes can commit
 * in the other order than their offsets, and a consumer that already moved past the later one never sees
 * the earlier one. Queen hands offsets out under the partition's row lock held to commit, so a consumer
 * acking as fast as it can while eight threads push into ONE partition sees every offset 0..N-1 exactly
 * once and in order.
 */
@QueenPostgres
class CommitOrderIT {
  private static final Logger LOG = LoggerFactory.getLogger(CommitOrderIT.class);
  private static final int PUSHERS = 8;
  private static final int MESSAGES = 5_000;
  private static final String PARTITION = "the-one";

  private Queen queen;
  private ExecutorService pool;

  @BeforeEach
  void start(DataSource ds) {
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("commit-order").start();
    pool = Executors.newFixedThreadPool(PUSHERS);
  }

  @AfterEach
  void stop() throws InterruptedException {
    pool.shutdownNow();
    pool.awaitTermination(10, TimeUnit.SECONDS);
    queen.close();
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void concurrentPushersIntoOnePartitionNeverLetTheCursorSkipAMessage() throws Exception {
    String q = "commit-order";
    AtomicInteger remaining = new AtomicInteger(MESSAGES);
    Map<Long, UUID> pushedByOffset = new ConcurrentHashMap<>();
    List<String> pushProblems = Collections.synchronizedList(new ArrayList<>());
    CountDownLatch go = new CountDownLatch(1);
    List<Future<Integer>> pushers = new ArrayList<>();
    for (int t = 0; t < PUSHERS; t++) {
      int thread = t;
      pushers.add(pool.submit(() -> {
        go.await();
        int pushes = 0;
        while (true) {
          // single-message and small-batch pushes, mixed
          int want = ThreadLocalRandom.current().nextInt(4) == 0 ? 1 + ThreadLocalRandom.current().nextInt(5) : 1;
          int left = remaining.getAndAdd(-want);
          if (left <= 0) {
            return pushes;
          }
          int k = Math.min(want, left);
          List<PushResult> rs;
          if (k == 1) {
            rs = List.of(queen.queue(q).partition(PARTITION).push(Map.of("t", thread, "i", pushes)));
          } else {
            List<PushItem> items = new ArrayList<>(k);
            for (int i = 0; i < k; i++) {
              items.add(PushItem.of(PARTITION, Map.of("t", thread, "i", pushes, "j", i)));
            }
            rs = queen.queue(q).push(items);
          }
          for (PushResult r : rs) {
            if (pushedByOffset.putIfAbsent(r.offset(), r.messageId()) != null) {
              pushProblems.add("offset " + r.offset() + " handed out twice");
            }
          }
          pushes++;
        }
      }));
    }

    // the consumer: pop and ack as fast as it can, checking that offsets come 0, 1, 2, ... with no gap
    ConsumerBuilder consumer = queen.queue(q).consumer().batch(100).waitFor(Duration.ofMillis(200));
    List<Long> seen = new ArrayList<>(MESSAGES);
    Map<UUID, Long> seenIds = new HashMap<>();
    List<String> problems = new ArrayList<>();
    AtomicBoolean pushing = new AtomicBoolean(true);
    long started = System.nanoTime();
    go.countDown();
    long next = 0;
    int rounds = 0;
    while (next < MESSAGES) {
      if (pushing.get() && pushers.stream().allMatch(Future::isDone)) {
        pushing.set(false);
        for (Future<Integer> f : pushers) {
          f.get(); // surface a pusher's failure
        }
        LOG.info("pushers done after {} ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
      }
      List<Message> batch = consumer.pop();
      if (batch.isEmpty()) {
        if (!pushing.get()) {
          break; // everything is pushed and nothing more comes: whatever is missing was skipped
        }
        continue;
      }
      rounds++;
      for (Message m : batch) {
        if (m.offset() != next) {
          problems.add("expected offset " + next + " got " + m.offset());
        }
        next = Math.max(next, m.offset() + 1);
        seen.add(m.offset());
        if (seenIds.put(m.id(), m.offset()) != null) {
          problems.add("message " + m.id() + " delivered twice");
        }
      }
      List<AckResult> acks = queen.ack(batch);
      assertThat(acks).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    }
    LOG.info("consumer saw {} messages in {} rounds, {} ms", seen.size(), rounds,
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
    for (Future<Integer> f : pushers) {
      f.get(30, TimeUnit.SECONDS);
    }

    assertThat(pushProblems).isEmpty();
    assertThat(pushedByOffset).hasSize(MESSAGES);
    assertThat(problems).as("skipped, repeated or reordered offsets").isEmpty();
    assertThat(seen).hasSize(MESSAGES);
    for (int i = 0; i < MESSAGES; i++) {
      assertThat(seen.get(i)).isEqualTo(i);
    }
    Map<UUID, Long> expected = new HashMap<>();
    pushedByOffset.forEach((o, id) -> expected.put(id, o));
    assertThat(seenIds).isEqualTo(expected);
    assertThat(consumer.pop()).as("nothing left after the last offset").isEmpty();
    assertThat(E2e.lag(queen, q, Queen.DEFAULT_GROUP)).isZero();
    assertThat(rounds).as("the consumer ran concurrently with the pushers, in many rounds").isGreaterThan(10);
  }
}
