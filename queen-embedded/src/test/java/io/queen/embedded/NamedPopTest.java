package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The consume loop pops the partitions its wake-ups name, and scans only at start, when a wake-up names none, and
 * once per poll interval. Each test sets a poll interval of 20 s: a message that the named pops missed would wait for
 * that scan, so arriving within a few seconds shows it was popped by name.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class NamedPopTest {
  private static final Duration POLL = Duration.ofSeconds(20);
  private static final Duration SOON = Duration.ofSeconds(5);

  @Test
  void aPushIntoAPartitionWhoseUnitIsRunningIsPoppedByNameOnceTheUnitIsSettled(DataSource ds) throws Exception {
    heldPartition(ds, "n1", "held", (queen, q) -> {
      queen.queue(q).partition("a").push(Map.of("n", 1)); // named while the unit holds "a"
      queen.queue(q).partition("b").push(Map.of("n", 2)); // another partition: popped at once
    });
  }

  @Test
  void aTransactionsPushIntoAHeldPartitionIsPoppedByNameOnceTheUnitIsSettled(DataSource ds) throws Exception {
    // a transaction Queen owns (as the source connector's bundles are) names what it pushed, as a push does
    heldPartition(ds, "n3", "held-tx", (queen, q) -> assertThat(queen.transaction().push(q, "a", Map.of("n", 1))
        .push(q, "b", Map.of("n", 2)).commit().success()).isTrue());
  }

  @Test
  void aPushInTheApplicationsTransactionIntoAHeldPartitionIsPoppedOnceTheUnitIsSettled(DataSource ds) throws Exception {
    // the application's own transaction: the node cannot name the partitions before that commit, so the wake-up
    // names none; the claimer scans, and the held partition comes back when its unit is settled
    heldPartition(ds, "n4", "held-app", (queen, q) -> {
      try (java.sql.Connection c = ds.getConnection()) {
        c.setAutoCommit(false);
        assertThat(queen.transaction().push(q, "a", Map.of("n", 1)).push(q, "b", Map.of("n", 2)).commit(c).success())
            .isTrue();
        c.commit();
      }
    });
  }

  /** Pushes message 1 into partition "a" and message 2 into "b" of the queue. */
  private interface PushOneAndTwo {
    void push(Queen queen, String queue) throws Exception;
  }

  /**
   * A unit of a loop holds partition "a" (message 0) while {@code push} puts message 1 into "a" and 2 into "b": 2
   * arrives at once, 1 only after the unit is settled, and then within {@link #SOON}, well before the poll interval's
   * scan.
   */
  private static void heldPartition(DataSource ds, String node, String q, PushOneAndTwo push) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("named").nodeId(node).pollInterval(POLL).start()) {
      CountDownLatch running = new CountDownLatch(1);
      CountDownLatch release = new CountDownLatch(1);
      List<Integer> seen = new CopyOnWriteArrayList<>();
      queen.queue(q).partition("a").push(Map.of("n", 0));
      try (Subscription s = queen.queue(q).consumer().concurrency(4).consume((Message m) -> {
        int n = m.payload().get("n").asInt();
        if (n == 0) {
          running.countDown();
          release.await();
        }
        seen.add(n);
      })) {
        assertThat(running.await(10, TimeUnit.SECONDS)).isTrue();
        push.push(queen, q);
        await().atMost(SOON).until(() -> seen.contains(2));
        assertThat(seen).doesNotContain(1);
        release.countDown();
        await().atMost(SOON).until(() -> seen.contains(1));
        assertThat(seen).containsSubsequence(0, 1);
      }
    }
  }

  @Test
  void anotherNodesPushIsPoppedByNameFromItsNotification(DataSource ds) throws Exception {
    try (Queen consumer = EmbeddedQueen.builder().dataSource(ds).schema("named").nodeId("c1").pollInterval(POLL).start();
        Queen producer = EmbeddedQueen.builder().dataSource(ds).schema("named").nodeId("p1").pollInterval(POLL).start()) {
      List<String> seen = new CopyOnWriteArrayList<>();
      producer.queue("remote").partition("warm").push(Map.of("n", 0)); // the queue exists before the subscription
      try (Subscription s = consumer.queue("remote").consumer().concurrency(4)
          .consume((Message m) -> seen.add(m.partition()))) {
        await().atMost(SOON).until(() -> seen.contains("warm")); // the scan at start
        // wait until the producer knows another node listens (its hello is heard, or the heartbeat sees it)
        await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(300)).until(() -> {
          boolean arrived = seen.contains("probe");
          producer.queue("remote").partition("probe").push(Map.of("n", 1));
          return arrived;
        });
        for (int i = 0; i < 5; i++) {
          String name = "x|" + i + ":" + i; // names holding the notification's separators
          producer.queue("remote").partition(name).push(Map.of("n", i));
          await().atMost(SOON).until(() -> seen.contains(name));
        }
      }
    }
  }

  @Test
  void aRetryThatFallsDueIsFoundByTheScanThatRunsOncePerPollInterval(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("named").nodeId("n2")
        .pollInterval(Duration.ofSeconds(1)).start()) {
      queen.queue("retry").configure(b -> b.retryDelay(Duration.ofMillis(300)).retryLimit(3));
      List<Integer> attempts = new CopyOnWriteArrayList<>();
      queen.queue("retry").partition("a").push(Map.of("n", 0));
      try (Subscription s = queen.queue("retry").consumer().consume((Message m) -> {
        attempts.add(m.attempt());
        if (m.attempt() == 1) {
          throw new IllegalStateException("first try fails");
        }
      })) {
        // nothing names the partition again: the scan finds the retry once it is due
        await().atMost(SOON).until(() -> attempts.contains(2));
        assertThat(s.failed()).isEqualTo(1);
      }
    }
  }
}
