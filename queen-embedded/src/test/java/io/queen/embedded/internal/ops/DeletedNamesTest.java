package io.queen.embedded.internal.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.internal.log.LogState;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Queues and groups that come and go under new names (per-tenant, per-job or temporary ones) leave nothing in the
 * node's memory once deleted: not their meters (counters and timers included), not their options, pop positions,
 * wake-up signals or listener sets. A soak found each of these growing for the node's life, about 790 meters per 100
 * queues and groups.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class DeletedNamesTest {

  @Test
  void deletedQueuesAndGroupsLeaveNoMetersAndNoNames(DataSource ds) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("churn").meterRegistry(registry)
        .pollInterval(Duration.ofMillis(100)).start()) {
      GroupWatch watch = Watches.groups(queen);
      queen.queue("steady").push(Map.of("i", 0)); // a queue that stays, for comparison
      Map<String, Integer> before = LogState.namesHeld(queen);
      for (int i = 0; i < 12; i++) {
        String q = "tmp-" + i;
        queen.queue(q).configure(c -> c.retention(Duration.ofHours(1)));
        queen.queue(q).partition("p").push(Map.of("i", i));
        AtomicInteger seen = new AtomicInteger();
        try (Subscription s = queen.queue(q).group("g-" + i).subscription(SubscriptionMode.ALL)
            .consume(m -> seen.incrementAndGet())) {
          Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 1);
        }
        queen.queue(q).group("once-" + i).subscription(SubscriptionMode.ALL).pop(); // a pop position, a signal
        watch.run(); // the group gauges
        assertThat(tagged(registry, q)).as("meters while the queue lives").isNotEmpty();
        String g = "g-" + i;
        queen.queue(q).group(g).delete();
        assertThat(registry.getMeters()).noneMatch(m -> q.equals(m.getId().getTag("queue"))
            && g.equals(m.getId().getTag("group")));
        queen.queue(q).delete();
        assertThat(tagged(registry, q)).as("meters of deleted queue %s", q).isEmpty();
      }
      assertThat(LogState.namesHeld(queen)).isEqualTo(before);
      // pops of queues that do not exist (a typo, names made up per request) keep no wake-up signal either; their
      // options views expire after 5 s and are pruned once there are 1,024
      for (int i = 0; i < 20; i++) {
        assertThat(queen.queue("never-" + i).consumer().pop()).isEmpty();
      }
      assertThat(LogState.namesHeld(queen).get("signals")).isEqualTo(before.get("signals"));
      // the queue that stays still counts, and a deleted name used again starts afresh
      queen.queue("tmp-0").push(Map.of("again", true));
      assertThat(registry.get("queen.messages.pushed").tag("queue", "tmp-0").counter().count()).isEqualTo(1.0);
      assertThat(registry.get("queen.messages.pushed").tag("queue", "steady").counter().count()).isEqualTo(1.0);
    }
  }

  /**
   * The same for queues and groups another node deleted: this node's group watch forgets a group at its next pass and
   * a queue once two passes found it missing (meters, pop positions, signals).
   */
  @Test
  void queuesAndGroupsDeletedByAnotherNodeAreForgottenByTheGroupWatch(DataSource ds) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen deleter = EmbeddedQueen.builder().dataSource(ds).schema("elsewhere").nodeId("deleter").start();
        Queen other = EmbeddedQueen.builder().dataSource(ds).schema("elsewhere").nodeId("other")
            .meterRegistry(registry).pollInterval(Duration.ofMillis(100)).start()) {
      GroupWatch watch = Watches.groups(other);
      other.queue("steady").push(Map.of("i", 0));
      watch.run();
      Map<String, Integer> before = LogState.namesHeld(other);
      for (int i = 0; i < 5; i++) {
        String q = "gone-" + i;
        other.queue(q).partition("p").push(Map.of("i", i));
        try (Subscription s = other.queue(q).group("g").subscription(SubscriptionMode.ALL).consume(m -> { })) {
          Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 1);
        }
        other.queue(q).group("once").subscription(SubscriptionMode.ALL).pop();
      }
      other.queue("steady").group("left").subscription(SubscriptionMode.ALL).pop();
      watch.run();
      assertThat(tagged(registry, "gone-0")).as("meters while the queue lives").isNotEmpty();
      assertThat(registry.getMeters()).anyMatch(m -> "left".equals(m.getId().getTag("group")));

      deleter.queue("steady").group("left").delete();
      for (int i = 0; i < 5; i++) {
        deleter.queue("gone-" + i).delete();
      }
      watch.run();
      assertThat(registry.getMeters()).as("a group deleted elsewhere: gone at the next pass")
          .noneMatch(m -> "left".equals(m.getId().getTag("group")));
      assertThat(tagged(registry, "gone-0")).as("a queue deleted elsewhere: kept after one pass").isNotEmpty();
      watch.run();
      for (int i = 0; i < 5; i++) {
        assertThat(tagged(registry, "gone-" + i)).as("meters of queue gone-%d deleted elsewhere", i).isEmpty();
      }
      assertThat(LogState.namesHeld(other)).isEqualTo(before);
      assertThat(tagged(registry, "steady")).as("the queue that stays keeps its meters").isNotEmpty();
      assertThat(registry.get("queen.messages.pushed").tag("queue", "steady").counter().count()).isEqualTo(1.0);
    }
  }

  private static java.util.List<Meter> tagged(SimpleMeterRegistry registry, String queue) {
    return registry.getMeters().stream().filter(m -> queue.equals(m.getId().getTag("queue"))).toList();
  }
}
