package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.EmbeddedQueen;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * PostgreSQL restarted under load: a server of this test's own (the shared test server cannot be
 * restarted under the other suites) is stopped while a producer pushes and four workers consume, and
 * started again on the same port and data directory. Deliveries resume within seconds of the server
 * accepting connections, and every message whose push succeeded is delivered (at least once: acks lost in
 * the outage mean redeliveries, which are counted).
 */
class RestartIT {
  private static final Logger LOG = LoggerFactory.getLogger(RestartIT.class);

  @Test
  @Timeout(value = 180, unit = TimeUnit.SECONDS)
  void deliveriesResumeSoonAfterARestartAndNothingIsLost() throws Exception {
    Path dir = Files.createTempDirectory("queen-restart-");
    int port = OwnServer.freePort();
    EmbeddedPostgres pg = OwnServer.start(dir, port);
    String url = "jdbc:postgresql://localhost:" + port + "/postgres";
    Map<Integer, AtomicInteger> delivered = new ConcurrentHashMap<>();
    AtomicLong lastDelivery = new AtomicLong();
    Set<Integer> acknowledgedPushes = ConcurrentHashMap.newKeySet();
    AtomicBoolean producing = new AtomicBoolean(true);
    AtomicInteger failedPushes = new AtomicInteger();
    try (Queen queen = EmbeddedQueen.builder().jdbcUrl(url, "postgres", "postgres").nodeId("restart")
        .pollInterval(Duration.ofMillis(500)).connectTimeout(Duration.ofSeconds(1)).start()) {
      queen.queue("restart").configure(c -> c.leaseTime(Duration.ofSeconds(5)));
      Subscription s = queen.queue("restart").consumer().concurrency(4).batch(10).consume(m -> {
        delivered.computeIfAbsent(m.payload().get("n").asInt(), k -> new AtomicInteger()).incrementAndGet();
        lastDelivery.set(System.nanoTime());
      });
      Thread producer = new Thread(() -> {
        int n = 0;
        while (producing.get()) {
          List<PushItem> items = new ArrayList<>();
          List<Integer> ns = new ArrayList<>();
          for (int i = 0; i < 10; i++, n++) {
            items.add(PushItem.of("p" + (n % 16), Map.of("n", n)));
            ns.add(n);
          }
          try {
            queen.queue("restart").push(items);
            acknowledgedPushes.addAll(ns);
          } catch (RuntimeException e) {
            failedPushes.incrementAndGet(); // the server is down: these may or may not be stored
          }
          try {
            Thread.sleep(5);
          } catch (InterruptedException e) {
            return;
          }
        }
      }, "restart-producer");
      producer.start();
      await().atMost(Duration.ofSeconds(30)).until(() -> delivered.size() > 500);

      pg.close(); // stops the server: every connection drops, new ones are refused
      long stoppedAt = System.nanoTime();
      Thread.sleep(3000);
      pg = OwnServer.start(dir, port);
      long upAt = System.nanoTime();
      await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(10)).until(() -> lastDelivery.get() > upAt);
      double resumeSeconds = (lastDelivery.get() - upAt) / 1e9;
      LOG.info("server down for {} ms; first delivery {} s after it accepted connections again",
          TimeUnit.NANOSECONDS.toMillis(upAt - stoppedAt), resumeSeconds);
      System.out.printf("FIGURE restart_resume_s %.2f s%n", resumeSeconds);

      Thread.sleep(2000); // more load after the restart
      producing.set(false);
      producer.join(10_000);
      await().atMost(Duration.ofSeconds(60)).until(() -> delivered.keySet().containsAll(acknowledgedPushes));
      Thread.sleep(1000);
      s.close();

      assertThat(resumeSeconds).as("deliveries resume soon after the server is back (target 2 s; CI margin)")
          .isLessThan(5.0);
      assertThat(delivered.keySet()).as("every push that returned normally is delivered").containsAll(acknowledgedPushes);
      Map<Integer, Integer> twice = new java.util.HashMap<>();
      delivered.forEach((n, c) -> {
        if (c.get() > 1 && acknowledgedPushes.contains(n)) {
          twice.put(n, c.get());
        }
      });
      LOG.info("{} messages pushed, {} push calls failed while the server was down, {} redelivered (at least once)",
          acknowledgedPushes.size(), failedPushes.get(), twice.size());
      assertThat(failedPushes.get()).as("pushes failed while the server was down").isPositive();
    } finally {
      pg.close();
    }
  }
}
