package io.queen.embedded.kv;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.KvReason;
import io.queen.KvWriteResult;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Two workers on one key at the same instant: the atomics decide, nothing is lost or doubled. */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class KvConcurrencyTest {
  private static KvFixture fx;
  private static ExecutorService pool;

  @BeforeAll
  static void migrate(DataSource ds) {
    fx = new KvFixture(ds);
    pool = Executors.newFixedThreadPool(20);
  }

  @AfterAll
  static void stop() {
    pool.shutdownNow();
  }

  @Test
  void rateLimiterAdmitsExactlyMax() throws Exception {
    KvOptions window = Kv.ttl(Duration.ofMinutes(5)).max(100);
    AtomicInteger admitted = new AtomicInteger();
    AtomicInteger limited = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> fs = new ArrayList<>();
    for (int t = 0; t < 20; t++) {
      fs.add(pool.submit(() -> {
        start.await();
        for (int i = 0; i < 10; i++) {
          KvWriteResult r = fx.kv.incr("limits", "acme:window-1", 1, window);
          if (r.applied()) {
            admitted.incrementAndGet();
          } else {
            assertThat(r.reason()).isEqualTo(KvReason.LIMIT);
            assertThat(r.longValue()).isEqualTo(100);
            limited.incrementAndGet();
          }
        }
        return null;
      }));
    }
    start.countDown();
    for (Future<?> f : fs) {
      f.get(60, TimeUnit.SECONDS);
    }
    assertThat(admitted.get()).isEqualTo(100);
    assertThat(limited.get()).isEqualTo(100);
    assertThat(fx.kv.get("limits", "acme:window-1").value().asLong()).isEqualTo(100);
  }

  @Test
  void racingPutIfAbsentHasExactlyOneWinner() throws Exception {
    for (int round = 0; round < 20; round++) {
      String key = "order:" + round;
      CountDownLatch start = new CountDownLatch(1);
      List<Future<KvWriteResult>> fs = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        int id = t;
        fs.add(pool.submit(() -> {
          start.await();
          return fx.kv.putIfAbsent("markers", key, "worker-" + id, Kv.ttl(Duration.ofHours(1)));
        }));
      }
      start.countDown();
      List<KvWriteResult> rs = new ArrayList<>();
      for (Future<KvWriteResult> f : fs) {
        rs.add(f.get(30, TimeUnit.SECONDS));
      }
      List<KvWriteResult> winners = rs.stream().filter(KvWriteResult::applied).toList();
      assertThat(winners).hasSize(1);
      String winner = winners.get(0).value().asText();
      assertThat(rs).filteredOn(r -> !r.applied()).allSatisfy(r -> {
        assertThat(r.reason()).isEqualTo(KvReason.EXISTS);
        assertThat(r.value().asText()).as("every loser sees the winner's value").isEqualTo(winner);
      });
    }
  }

  @Test
  void concurrentIncrementsAreNeverLost() throws Exception {
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> fs = new ArrayList<>();
    for (int t = 0; t < 20; t++) {
      fs.add(pool.submit(() -> {
        start.await();
        for (int i = 0; i < 25; i++) {
          fx.kv.incr("counters", "hits", 2, Kv.forever());
        }
        return null;
      }));
    }
    start.countDown();
    for (Future<?> f : fs) {
      f.get(60, TimeUnit.SECONDS);
    }
    assertThat(fx.kv.get("counters", "hits").value().asLong()).isEqualTo(1000);
    // 500 writes, 500 versions: a version never repeats, and the last write has the largest
    assertThat(fx.kv.get("counters", "hits").version()).isGreaterThanOrEqualTo(500);
  }
}
