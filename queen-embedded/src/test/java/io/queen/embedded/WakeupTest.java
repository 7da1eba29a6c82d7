package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.internal.QueenImpl;
import io.queen.embedded.internal.log.LogState;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Pops that match the work: one claimer per subscription pops for its idle workers, so a push wakes one
 * pop, not one per worker; a node ignores its own notifications (its waiters were woken at the commit); and a node
 * alone sends none, until another node says hello.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WakeupTest {

  private static double pops(SimpleMeterRegistry r, String q, String outcome) {
    Counter c = r.find("queen.consumer.pops").tags("queue", q, "outcome", outcome).counter();
    return c == null ? 0 : c.count();
  }

  /** Waits until no pop happened for 500 ms. */
  private static void settle(SimpleMeterRegistry r, String q) throws InterruptedException {
    double last = -1;
    double now = pops(r, q, "messages") + pops(r, q, "empty");
    while (now != last) {
      last = now;
      Thread.sleep(500);
      now = pops(r, q, "messages") + pops(r, q, "empty");
    }
  }

  @Test
  void oneMessageAndSixteenIdleWorkersIsOnePop(DataSource ds) throws Exception {
    String q = "wake-one";
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    // polls only every 30 s: every pop here follows a wake-up
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("w1").meterRegistry(registry)
        .pollInterval(Duration.ofSeconds(30)).start()) {
      queen.queue(q).partition("p0").push(Map.of("n", 0)); // the queue exists before the consumer starts
      AtomicInteger handled = new AtomicInteger();
      try (Subscription s = queen.queue(q).consumer().concurrency(16).consume(m -> handled.incrementAndGet())) {
        await().atMost(Duration.ofSeconds(10)).until(() -> handled.get() == 1);
        settle(registry, q); // the claimer has settled into its wait (on a loaded machine a start-up pop can be late)
        double before = pops(registry, q, "messages") + pops(registry, q, "empty");
        double emptyBefore = pops(registry, q, "empty"); // (one may come at start, while workers are still starting)
        for (int i = 1; i <= 20; i++) {
          queen.queue(q).partition("p" + i).push(Map.of("n", i));
          int want = i + 1;
          await().atMost(Duration.ofSeconds(10)).until(() -> handled.get() == want);
          Thread.sleep(50); // the worker acks and goes idle; the claimer waits again
        }
        settle(registry, q);
        double pops = pops(registry, q, "messages") + pops(registry, q, "empty") - before;
        // twenty pushes, each waking one pop that finds its message: not 16 pops per push
        assertThat(pops).isEqualTo(20);
        assertThat(pops(registry, q, "empty") - emptyBefore).isZero();
        assertThat(s.acked()).isEqualTo(21);
        assertThat(registry.find("queen.consumer.outcomes").tags("queue", q, "outcome", "acked").counter().count())
            .isEqualTo(21);
      }
    }
  }

  @Test
  void aNodeIgnoresItsOwnNotifications(DataSource ds) {
    try (Queen a = EmbeddedQueen.builder().dataSource(ds).nodeId("w2").start();
        Queen b = EmbeddedQueen.builder().dataSource(ds).nodeId("w3").pollInterval(Duration.ofSeconds(30)).start()) {
      QueenImpl ai = (QueenImpl) a;
      await().atMost(Duration.ofSeconds(10)).until(() -> ai.wakeups().connected() && ((QueenImpl) b).wakeups().connected());
      AtomicInteger got = new AtomicInteger();
      a.queue("wake-own").push(Map.of("n", 0));
      try (Subscription s = b.queue("wake-own").consumer().consume(m -> got.incrementAndGet())) {
        await().atMost(Duration.ofSeconds(10)).until(() -> got.get() == 1);
        for (int i = 1; i <= 5; i++) {
          a.queue("wake-own").push(Map.of("n", i));
          int want = i + 1;
          // b polls every 30 s: only a's notification can wake it this fast
          await().atMost(Duration.ofSeconds(5)).until(() -> got.get() == want);
        }
      }
      await().atMost(Duration.ofSeconds(5)).until(() -> LogState.ownNotificationsIgnored(a) >= 1);
      assertThat(LogState.ownNotificationsIgnored(b)).isZero();
    }
  }
  @Test
  void aNodeAloneSendsNoNotificationsUntilAnotherNodeSaysHello(DataSource ds) {
    String schema = "alone";
    try (Queen a = EmbeddedQueen.builder().dataSource(ds).schema(schema).nodeId("solo").start()) {
      // the first heartbeat sees no other node; the node's own hello went out at start
      await().atMost(Duration.ofSeconds(10)).until(() -> !LogState.othersAlive(a) && LogState.notificationsSent(a) >= 1);
      long sent = LogState.notificationsSent(a);
      for (int i = 0; i < 20; i++) {
        a.queue("alone-q").partition("p").push(Map.of("n", i));
      }
      assertThat(LogState.notificationsSent(a)).as("no NOTIFY while alone").isEqualTo(sent);

      AtomicInteger got = new AtomicInteger();
      try (Queen b = EmbeddedQueen.builder().dataSource(ds).schema(schema).nodeId("second")
          .pollInterval(Duration.ofSeconds(30)).start();
          Subscription s = b.queue("alone-q").consumer().batch(100).consume(m -> got.incrementAndGet())) {
        // b's hello (or a's next heartbeat) tells a that someone listens
        await().atMost(Duration.ofSeconds(5)).until(() -> LogState.othersAlive(a));
        await().atMost(Duration.ofSeconds(10)).until(() -> got.get() == 20);
        for (int i = 20; i < 23; i++) {
          a.queue("alone-q").partition("p").push(Map.of("n", i));
          int want = i + 1;
          // b polls every 30 s: only a's notification can wake it this fast
          await().atMost(Duration.ofSeconds(5)).until(() -> got.get() == want);
        }
        assertThat(LogState.notificationsSent(a)).isGreaterThan(sent);
      }
      // b removed its row on close: a's next heartbeat sees it alone again
      await().atMost(Duration.ofSeconds(10)).until(() -> !LogState.othersAlive(a));
    }
  }
}
