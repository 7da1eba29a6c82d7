package io.queen.examples;

import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.KvWriteResult;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * A fixed-window rate limiter in one call: {@code incr} with a TTL and a {@code max}.
 *
 * <p>The key has no window number in it. The first request of a window creates the counter with the
 * window's length as TTL; later requests keep that expiry (an incr's TTL is create-only), so the window
 * closes on time even under constant load; once it has expired, the next incr sees zero and starts a
 * fresh window. With {@code max}, {@code applied} is the admission decision: a request that would
 * breach the ceiling writes nothing and answers {@code LIMIT} with the current count. The clock is the
 * database's, so every node of the cluster shares the same windows.
 *
 * <p>The second half puts the limiter in a transaction with a push: a refused request enqueues nothing.
 *
 * <p>Runs against {@code QUEEN_JDBC_URL} when set, else an embedded PostgreSQL 17.
 */
public final class RateLimiterMain {
  private static final int LIMIT = 10;
  private static final Duration WINDOW = Duration.ofSeconds(1);

  private RateLimiterMain() {}

  public static void main(String[] args) throws Exception {
    try (Example db = Example.database("rate_limiter");
        Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("limiter").start()) {
      say("Queen started on " + db.description());
      run(queen, RateLimiterMain::say);
    }
  }

  /** The whole example on a started node; reports through {@code say}. */
  public static void run(Queen queen, Consumer<String> say) throws Exception {
    KvOptions window = Kv.ttl(WINDOW).max(LIMIT);

    // 8 clients of tenant "acme" hammer the API for about 3 seconds
    Map<Instant, AtomicInteger> admittedPerWindow = new ConcurrentHashMap<>();
    AtomicInteger refused = new AtomicInteger();
    ExecutorService clients = Executors.newFixedThreadPool(8);
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(3200);
    List<Future<?>> fs = new ArrayList<>();
    for (int t = 0; t < 8; t++) {
      fs.add(clients.submit(() -> {
        while (System.nanoTime() < end) {
          KvWriteResult r = queen.kv().incr("ratelimit", "api:acme", 1, window);
          if (r.applied()) {
            // every request of one window sees the same expiry: it names the window
            admittedPerWindow.computeIfAbsent(r.expiresAt(), w -> new AtomicInteger()).incrementAndGet();
          } else {
            refused.incrementAndGet(); // reason LIMIT; r.longValue() is the count, r.expiresAt() the reset time
          }
          Thread.sleep(5);
        }
        return null;
      }));
    }
    for (Future<?> f : fs) {
      f.get(30, TimeUnit.SECONDS);
    }
    clients.shutdown();
    Map<Instant, AtomicInteger> sorted = new TreeMap<>(admittedPerWindow);
    int i = 0;
    for (Map.Entry<Instant, AtomicInteger> w : sorted.entrySet()) {
      say.accept("window " + (++i) + " (closes " + w.getKey() + "): admitted " + w.getValue().get() + " of " + LIMIT);
      if (w.getValue().get() > LIMIT) {
        throw new IllegalStateException("a window admitted more than its limit");
      }
    }
    say.accept("refused " + refused.get() + " requests with reason LIMIT; nothing was written for them");

    // the limiter in a bundle: admission and the work it admits commit together
    KvOptions perMinute = Kv.ttl(Duration.ofMinutes(1)).max(3).required();
    for (int n = 1; n <= 5; n++) {
      CommitResult res = queen.transaction()
          .incr("ratelimit", "exports:acme", 1, perMinute)
          .push("exports", "acme", Map.of("request", n))
          .commit();
      say.accept("export request " + n + ": " + (res.success() ? "queued"
          : "refused (" + res.reason() + ", " + res.writes().get(0).reason() + " at " + res.value() + ")"));
    }
    int queued = queen.queue("exports").consumer().batch(100).pop().size();
    say.accept("exports queued: " + queued + " (the refused requests pushed nothing)");
  }

  static void say(String line) {
    System.out.println("[rate-limiter] " + line);
  }
}
