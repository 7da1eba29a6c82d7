package io.queen.bench;

import com.zaxxer.hikari.HikariDataSource;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Json;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.QueueClient;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The engine figures: the consume loop (one claimer per subscription, 16 workers)
 * against a raw {@code SKIP LOCKED} delete queue with the same threads and connections, in the same run.
 *
 * <ul>
 *   <li>{@code e2e_vs_raw_queue}: one producer pushing batches of 128 round-robin over 256 partitions as fast as it goes,
 *       16 workers; messages completed per second.
 *   <li>{@code consume_pops}: {@code consume_pops_per_message} and {@code consume_empty_pop_share} at 200 msgs/s offered, from
 *       the {@code queen.consumer.pops} counter.
 *   <li>{@code consume_vs_raw}: server CPU per message at a steady 2,000 msgs/s (from {@code /proc/<pid>/stat} of the
 *       PostgreSQL processes), and from the same Queen phase {@code cursor_updates_per_message} / {@code cursor_hot_share}.
 *   <li>{@code consume_claim}: push-to-handler-start p50/p99 at 2,500 msgs/s (the payload carries {@link System#nanoTime()}).
 *   <li>{@code dead_tuples_held_xmin}: dead tuples on the hot tables after a steady 2,000 msgs/s while another connection
 *       holds the xmin horizon, Queen against the raw queue.
 *   <li>{@code held_xmin_throughput}: 2 Queen nodes x 8 workers at 800 msgs/s, a clean phase, then one with the xmin horizon
 *       held: completed / 800, and both phases' claim p99.
 * </ul>
 *
 * <p>Pushes are paced: {@value #PUSHERS} threads push single messages on a fixed schedule (round-robin over the partitions);
 * when pushes fall behind it, the next push takes every message due (up to {@value Paced#CATCH_UP}), so the offered rate
 * does not depend on how fast a push returns; the rate actually offered is printed.
 */
final class EngineBench {
  static final int PARTITIONS = 256;
  static final int WORKERS = 16;
  static final int PUSHERS = 4;
  static final int E2E_BATCH = 128;
  static final int RAW_TAKE = 8;
  /** The raw workers' longest sleep when the table is empty: Queen's default poll interval. */
  static final long RAW_IDLE_MILLIS = EmbeddedQueen.DEFAULT_POLL_INTERVAL.toMillis();
  static final String SCHEMA = EmbeddedQueen.DEFAULT_SCHEMA;
  static final List<String> HOT_TABLES = List.of("cursors", "partitions", "messages");

  private final QueenBenchmark b;
  private final String[] names = new String[PARTITIONS];
  private int nodeCounter;

  EngineBench(QueenBenchmark b) {
    this.b = b;
    for (int i = 0; i < PARTITIONS; i++) {
      names[i] = String.format(Locale.ROOT, "e%03d", i);
    }
  }

  // ------------------------------------------------------------------------------------------------------- e2e

  void e2eVsRawQueue() throws Exception {
    Duration warmup = b.options().warmup();
    Duration window = b.options().e2eWindow();
    String q = b.queueName("e2e");
    long[] queenR;
    try (Nodes nodes = new Nodes(1, WORKERS + 4)) {
      QueueClient queue = nodes.queen(0).queue(q);
      prime(queue);
      b.settle();
      Subscription sub = queue.group("g").subscription(SubscriptionMode.ALL).concurrency(WORKERS).consume(m -> { });
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong pushed = new AtomicLong();
      ExecutorService producer = Executors.newSingleThreadExecutor(ThroughputRunner.named("bench-e2e-push"));
      Future<?> f = producer.submit(() -> {
        long k = 0;
        while (!stop.get()) {
          List<PushItem> items = new ArrayList<>(E2E_BATCH);
          for (int i = 0; i < E2E_BATCH; i++, k++) {
            items.add(PushItem.of(names[(int) (k % PARTITIONS)], Json.of(b.payloads().get((int) k))));
          }
          queue.push(items);
          pushed.addAndGet(E2E_BATCH);
        }
        return null;
      });
      WaitSampler sampler = null;
      try {
        LockSupport.parkNanos(warmup.toNanos());
        sampler = WaitSampler.start(b.options().diagnose(), "e2e Queen", b.options().diagnose() ? b.db().connection() : null);
        long p0 = pushed.get();
        queenR = window(sub::acked, Duration.ZERO, window);
        if (b.options().diagnose()) {
          b.say(String.format(Locale.ROOT, "  Queen: %,.0f msgs/s pushed in the window; %,d pushed and not yet completed at its end",
              (pushed.get() - p0) * 1e9 / queenR[1], pushed.get() - sub.acked()));
        }
      } finally {
        if (sampler != null) {
          sampler.close();
        }
        stop.set(true);
        f.get(60, TimeUnit.SECONDS);
        ThroughputRunner.shutdown(producer, "e2e-push");
        sub.close(Duration.ofSeconds(5));
      }
      b.say(String.format(Locale.ROOT, "  Queen: %,.0f msgs/s completed (%,d in %.1f s; handler failures %d, leases lost %d)",
          queenR[0] * 1e9 / queenR[1], queenR[0], queenR[1] / 1e9, sub.failed(), sub.leaseLost()));
      nodes.deleteQueue(q);
    }

    b.settle();
    long[] rawR;
    AtomicLong deleted = new AtomicLong();
    try (RawQueue raw = new RawQueue(1, WORKERS, deleted)) {
      raw.startProducer(k -> {
        String[] parts = new String[E2E_BATCH];
        String[] texts = new String[E2E_BATCH];
        for (int i = 0; i < E2E_BATCH; i++) {
          parts[i] = names[(int) ((k * E2E_BATCH + i) % PARTITIONS)];
          texts[i] = b.payloads().get((int) (k * E2E_BATCH + i));
        }
        return new String[][] {parts, texts};
      }, -1);
      LockSupport.parkNanos(warmup.toNanos());
      try (WaitSampler sampler = WaitSampler.start(b.options().diagnose(), "e2e raw",
          b.options().diagnose() ? b.db().connection() : null)) {
        rawR = window(deleted::get, Duration.ZERO, window);
      }
    }
    b.truncateRaw();
    double queenRate = queenR[0] * 1e9 / queenR[1];
    double rawRate = rawR[0] * 1e9 / rawR[1];
    b.say(String.format(Locale.ROOT, "  raw: %,.0f msgs/s completed (%,d in %.1f s)", rawRate, rawR[0], rawR[1] / 1e9));
    double ratio = queenRate / rawRate;
    b.row("e2e_vs_raw_queue", QueenBenchmark.num(queenRate, 0), QueenBenchmark.num(rawRate, 0), "msgs/s",
        QueenBenchmark.num(ratio, 3), ">= 1.0", QueenBenchmark.verdict(ratio >= 1.0), "1 producer (push of " + E2E_BATCH
        + "), concurrency(" + WORKERS + "), " + PARTITIONS + " partitions, " + window.toSeconds() + " s; raw: unnest insert of "
        + E2E_BATCH + ", delete .. skip locked limit " + RAW_TAKE);
    b.line("RATIO e2e_vs_raw_queue " + QueenBenchmark.num(ratio, 3));
    b.line(QueenBenchmark.figure("e2e_msgs_per_s", queenRate, "msgs/s"));
    b.line(QueenBenchmark.figure("e2e_raw_msgs_per_s", rawRate, "msgs/s"));
  }

  /**
   * With {@code --diagnose}: the claim latency of a steady phase in 2-second slices of push time (messages are pushed at
   * {@code rate} in sequence order), so a tail made of stalls reads apart from one that grows with the phase.
   */
  private void timeline(long[] lat, long first, int rate) {
    int slice = rate * 2;
    StringBuilder sb = new StringBuilder("  claim by push time (2 s slices: p50/p99/max ms):");
    for (long from = first; from < lat.length; from += slice) {
      long[] s = Arrays.stream(lat, (int) from, (int) Math.min(lat.length, from + slice)).filter(v -> v > 0).sorted().toArray();
      if (s.length > 0) {
        sb.append(String.format(Locale.ROOT, " %.0f/%.0f/%.0f", QueenBenchmark.percentile(s, 0.5) / 1e6,
            QueenBenchmark.percentile(s, 0.99) / 1e6, s[s.length - 1] / 1e6));
      }
    }
    b.say(sb.toString());
  }

  /** Returns {messages, nanos} of a window that starts after {@code warmup}. */
  private static long[] window(java.util.function.LongSupplier counter, Duration warmup, Duration window) {
    LockSupport.parkNanos(warmup.toNanos());
    long c0 = counter.getAsLong();
    long t0 = System.nanoTime();
    LockSupport.parkNanos(window.toNanos());
    long c1 = counter.getAsLong();
    long t1 = System.nanoTime();
    return new long[] {c1 - c0, t1 - t0};
  }

  // --------------------------------------------------------------------------------------------- steady phases

  /** What a steady phase measured. */
  record Steady(double offered, long completed, double seconds, long pops, long emptyPops, long[] latencies, double cpuAll,
      double cpuBackends, Map<String, long[]> tables, long failures, long[] warmLatencies) {
    double rate() {
      return completed / seconds;
    }

    double p(double q) {
      return QueenBenchmark.percentile(latencies, q) / 1e6;
    }

    long upd(String t) {
      long[] v = tables.get(t);
      return v == null ? 0 : v[0];
    }

    long hot(String t) {
      long[] v = tables.get(t);
      return v == null ? 0 : v[1];
    }

    long dead(String t) {
      long[] v = tables.get(t);
      return v == null ? 0 : v[2];
    }
  }

  /**
   * A steady phase through the consume loop: {@code rate} msgs/s pushed one message per push, round-robin over
   * {@value #PARTITIONS} partitions by {@value #PUSHERS} paced threads through node 0, consumed by {@code nodes} Queen instances
   * of {@code workers} workers each. Measures over {@code window} after {@code warmup}: completions, the loop's pops, the
   * push-to-handler latency, the server's CPU, and the hot tables' update counters.
   */
  Steady queenSteady(String label, int rate, int nodeCount, int workers, Duration warmup, Duration window, boolean holdXmin)
      throws Exception {
    String q = b.queueName(label);
    long total = Math.round(rate * (warmup.toMillis() + window.toMillis()) / 1000.0);
    long first = Math.round(rate * warmup.toMillis() / 1000.0);
    long[] lat = new long[(int) total];
    AtomicLong handled = new AtomicLong();
    AtomicLong measuredHandled = new AtomicLong();
    List<Subscription> subs = new ArrayList<>();
    Steady result;
    try (Nodes nodes = new Nodes(nodeCount, workers + PUSHERS + 4)) {
      QueueClient pushQueue = nodes.queen(0).queue(q);
      prime(pushQueue);
      b.settle();
      for (int n = 0; n < nodeCount; n++) {
        subs.add(nodes.queen(n).queue(q).group("g").subscription(SubscriptionMode.ALL).concurrency(workers).consume(m -> {
          long now = System.nanoTime();
          var p = m.payload();
          if (!p.has("seq")) {
            return;
          }
          int seq = (int) p.get("seq").asLong();
          if (seq >= 0 && seq < lat.length) {
            lat[seq] = Math.max(1, now - p.get("t").asLong());
            if (seq >= first) {
              measuredHandled.incrementAndGet();
            }
          }
          handled.incrementAndGet();
        }));
      }
      LockSupport.parkNanos(300_000_000L); // the subscriptions take the prime messages
      XminHolder holder = holdXmin ? new XminHolder() : null;
      try {
        Paced pacer = new Paced(rate, total, (seq, count) -> {
          if (count == 1) {
            pushQueue.partition(names[(int) (seq % PARTITIONS)]).push(Json.of(Payloads.stamped(seq, System.nanoTime())));
            return;
          }
          long t = System.nanoTime();
          List<PushItem> items = new ArrayList<>(count);
          for (int i = 0; i < count; i++) {
            items.add(PushItem.of(names[(int) ((seq + i) % PARTITIONS)], Json.of(Payloads.stamped(seq + i, t))));
          }
          pushQueue.push(items);
        });
        LockSupport.parkNanos(warmup.toNanos());
        double[] pops0 = nodes.pops();
        Snapshot s0 = snapshot();
        long t0 = System.nanoTime();
        pacer.awaitDone(window.plus(Duration.ofMinutes(2)));
        long t1 = System.nanoTime();
        // the messages pushed in the window that are still in flight are waited for (up to 10 s), then counted
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (handled.get() < total && System.nanoTime() < deadline) {
          LockSupport.parkNanos(2_000_000);
        }
        long t2 = System.nanoTime();
        double[] pops1 = nodes.pops();
        Snapshot s1 = snapshot();
        long failures = 0;
        for (Subscription s : subs) {
          failures += s.failed() + s.leaseLost();
        }
        subs.forEach(s -> s.close(Duration.ofSeconds(5)));
        long[] measured = Arrays.stream(lat, (int) first, (int) total).filter(v -> v > 0).sorted().toArray();
        double seconds = (t1 - t0) / 1e9;
        // completions per second over the window: every message pushed in it reached its handler by t2 (or not: missing)
        long missing = (total - first) - measured.length;
        double completedSeconds = missing == 0 ? seconds : (t2 - t0) / 1e9;
        long[] warm = Arrays.stream(lat, 0, (int) first).filter(v -> v > 0).sorted().toArray();
        result = new Steady(pacer.offered(first), measuredHandled.get(), completedSeconds, (long) (pops1[0] - pops0[0]),
            (long) (pops1[1] - pops0[1]), measured, s1.cpuAll - s0.cpuAll, s1.cpuBackends - s0.cpuBackends, null, failures,
            warm);
        b.say(String.format(Locale.ROOT, "  Queen %s: offered %.0f msgs/s, %,d of %,d measured messages handled, %d missing;"
            + " pops %,d (empty %,d); claim p50 %.2f ms p99 %.2f ms max %.1f ms; failures+lost %d", label, result.offered(),
            measured.length, total - first, missing, result.pops(), result.emptyPops(), result.p(0.5), result.p(0.99),
            measured.length == 0 ? 0 : measured[measured.length - 1] / 1e6, failures));
        if (b.options().diagnose()) {
          timeline(lat, first, rate);
        }
        // table counters: read after the pools close (a backend flushes its statistics when it exits)
        Snapshot s0f = s0;
        nodes.closeAll();
        LockSupport.parkNanos(1_500_000_000L);
        Snapshot s2 = tablesOnly();
        b.deleteQueue(b.queen(), q); // after the counters: deleting the queue's rows makes dead tuples of its own
        result = new Steady(result.offered(), result.completed(), result.seconds(), result.pops(), result.emptyPops(),
            result.latencies(), result.cpuAll(), result.cpuBackends(), diff(s0f.tables, s2.tables), failures, warm);
      } finally {
        if (holder != null) {
          holder.close();
        }
      }
    }
    return result;
  }

  /** The raw queue at a steady rate: the same paced pushers (single-row INSERT per commit) and 16 deleting workers. */
  Steady rawSteady(String label, int rate, Duration warmup, Duration window, boolean holdXmin) throws Exception {
    b.truncateRaw();
    b.settle();
    long total = Math.round(rate * (warmup.toMillis() + window.toMillis()) / 1000.0);
    long first = Math.round(rate * warmup.toMillis() / 1000.0);
    AtomicLong deleted = new AtomicLong();
    Steady result;
    XminHolder holder = holdXmin ? new XminHolder() : null;
    try (RawQueue raw = new RawQueue(PUSHERS, WORKERS, deleted)) {
      Paced pacer = new Paced(rate, total, raw::insert);
      LockSupport.parkNanos(warmup.toNanos());
      long d0 = deleted.get();
      Snapshot s0 = snapshot();
      long t0 = System.nanoTime();
      pacer.awaitDone(window.plus(Duration.ofMinutes(2)));
      long t1 = System.nanoTime();
      long deadline = System.nanoTime() + 10_000_000_000L;
      while (deleted.get() < total && System.nanoTime() < deadline) {
        LockSupport.parkNanos(2_000_000);
      }
      Snapshot s1 = snapshot();
      long d1 = deleted.get();
      raw.close();
      LockSupport.parkNanos(1_500_000_000L);
      Snapshot s2 = tablesOnly();
      result = new Steady(pacer.offered(first), d1 - d0, (t1 - t0) / 1e9, raw.polls.get(), raw.emptyPolls.get(), new long[0],
          s1.cpuAll - s0.cpuAll, s1.cpuBackends - s0.cpuBackends, diff(s0.tables, s2.tables), 0, new long[0]);
      b.say(String.format(Locale.ROOT, "  raw %s: offered %.0f msgs/s, %,d deleted in the window (+ tail); %,d deletes"
          + " (%,d empty)", label, result.offered(), d1 - d0, raw.polls.get(), raw.emptyPolls.get()));
    } finally {
      if (holder != null) {
        holder.close();
      }
    }
    return result;
  }

  void consumePops() throws Exception {
    Steady s = queenSteady("pops", 200, 1, WORKERS, b.options().warmup(), b.options().steadyWindow(), false);
    double perMessage = (double) s.pops() / Math.max(1, s.completed());
    double emptyShare = (double) s.emptyPops() / Math.max(1, s.pops());
    String note = "200 msgs/s offered, single pushes round-robin over " + PARTITIONS + " partitions, concurrency(" + WORKERS
        + "), " + b.options().steadyWindow().toSeconds() + " s; queen.consumer.pops";
    b.row("consume_pops_per_msg", QueenBenchmark.num(perMessage, 3), "", "pops", "", "<= 1.5",
        QueenBenchmark.verdict(perMessage <= 1.5), note);
    b.row("consume_empty_share", QueenBenchmark.num(emptyShare, 3), "", "", "", "<= 0.5",
        QueenBenchmark.verdict(emptyShare <= 0.5), note);
    b.line(QueenBenchmark.figure("consume_pops_per_message", perMessage, "pops"));
    b.line(QueenBenchmark.figure("consume_empty_pop_share", emptyShare, "share"));
  }

  void consumeVsRaw() throws Exception {
    Duration window = b.options().steadyWindow();
    if (!cpuReadable()) {
      throw new IllegalStateException("the PostgreSQL server's processes are not readable in /proc (external server?)");
    }
    b.say("  pg_stat_statements available: " + statStatementsAvailable() + " (not used: it needs shared_preload_libraries);"
        + " CPU from /proc/<pid>/stat of the postmaster's processes");
    Steady queenS = queenSteady("cpu", 2000, 1, WORKERS, b.options().warmup(), window, false);
    Steady rawS = rawSteady("cpu", 2000, b.options().warmup(), window, false);
    double qAll = queenS.cpuAll() / queenS.completed() * 1e6;
    double rAll = rawS.cpuAll() / rawS.completed() * 1e6;
    double qBack = queenS.cpuBackends() / queenS.completed() * 1e6;
    double rBack = rawS.cpuBackends() / rawS.completed() * 1e6;
    b.say(String.format(Locale.ROOT, "  server CPU per message: Queen %.0f us (backends %.0f), raw %.0f us (backends %.0f);"
        + " CPU used: Queen %.2f s / raw %.2f s", qAll, qBack, rAll, rBack, queenS.cpuAll(), rawS.cpuAll()));
    double ratio = qAll / rAll;
    b.row("consume_vs_raw", QueenBenchmark.num(qAll, 1), QueenBenchmark.num(rAll, 1), "us/msg", QueenBenchmark.num(ratio, 3),
        "<= 1.0", QueenBenchmark.verdict(ratio <= 1.0), "server CPU per message (all postmaster processes, /proc) at 2,000"
        + " msgs/s, " + WORKERS + " workers, " + window.toSeconds() + " s; backends only " + QueenBenchmark.num(qBack, 1)
        + " vs " + QueenBenchmark.num(rBack, 1));
    b.line("RATIO consume_vs_raw " + QueenBenchmark.num(ratio, 3));
    b.line(QueenBenchmark.figure("consume_cpu_us_per_message", qAll, "us"));
    b.line(QueenBenchmark.figure("raw_cpu_us_per_message", rAll, "us"));
    cursorFigures(queenS, "2,000 msgs/s, " + window.toSeconds() + " s");
  }

  /** cursor_updates_per_message and cursor_hot_share from a steady Queen phase. */
  void cursorFigures(Steady s, String what) {
    long upd = s.upd("cursors") + s.upd("partitions");
    long hot = s.hot("cursors") + s.hot("partitions");
    double perMessage = (double) upd / Math.max(1, s.completed());
    double hotShare = upd == 0 ? 1 : (double) hot / upd;
    b.say(String.format(Locale.ROOT, "  updates over %,d messages: cursors %,d (HOT %,d), partitions %,d (HOT %,d)",
        s.completed(), s.upd("cursors"), s.hot("cursors"), s.upd("partitions"), s.hot("partitions")));
    double cursorsOnly = (double) s.upd("cursors") / Math.max(1, s.completed());
    b.row("cursor_updates_per_msg", QueenBenchmark.num(perMessage, 3), "", "updates", "", "", "", what
        + "; cursors + partitions (cursors alone " + QueenBenchmark.num(cursorsOnly, 3) + ")");
    b.row("cursor_hot_share", QueenBenchmark.num(hotShare, 3), "", "", "", ">= 0.9", QueenBenchmark.verdict(hotShare >= 0.9),
        what + "; cursors alone " + QueenBenchmark.num(s.upd("cursors") == 0 ? 1 : (double) s.hot("cursors")
        / s.upd("cursors"), 3));
    b.line(QueenBenchmark.figure("cursor_updates_per_message", perMessage, "updates"));
    b.line(QueenBenchmark.figure("cursor_hot_share", hotShare, "share"));
  }

  /**
   * The claim latency at 2,500 msgs/s in steady state: the phase's load runs unmeasured for {@code --jit-warmup} seconds
   * (default 12; at least {@code --warmup}) before its window, as the push phases' code does before theirs. A fresh
   * queue's first seconds measure one-time work: the just-in-time compiler on the consume path (claims of 100–500 ms in
   * the first 2 s) and the statistics guard's ANALYZE of {@code messages} once the new queue's log has grown tenfold
   * (every backend's cached plans are made again: claims of about 100 ms for a moment). Their p99 is printed too
   * ({@code consume_claim_settle_p99_ms}), not hidden.
   */
  void consumeClaim() throws Exception {
    Duration settle = b.options().jitWarmup().compareTo(b.options().warmup()) > 0 ? b.options().jitWarmup()
        : b.options().warmup();
    Steady s = queenSteady("claim", 2500, 1, WORKERS, settle, b.options().steadyWindow(), false);
    String note = "2,500 msgs/s offered (" + QueenBenchmark.num(s.offered(), 0) + " reached), concurrency(" + WORKERS + "), "
        + PARTITIONS + " partitions, " + b.options().steadyWindow().toSeconds() + " s after " + settle.toSeconds()
        + " s of the same load; push call to handler start";
    b.row("consume_claim_p50_ms", QueenBenchmark.num(s.p(0.5), 3), "", "ms", "", "<= 5", QueenBenchmark.verdict(s.p(0.5) <= 5),
        note);
    b.row("consume_claim_p99_ms", QueenBenchmark.num(s.p(0.99), 3), "", "ms", "", "<= 25",
        QueenBenchmark.verdict(s.p(0.99) <= 25), note);
    double settleP99 = QueenBenchmark.percentile(s.warmLatencies(), 0.99) / 1e6;
    b.row("consume_claim_settle_p99_ms", QueenBenchmark.num(settleP99, 3), "", "ms", "", "", "",
        "the same phase's first " + settle.toSeconds() + " s (a fresh queue; not measured above)");
    b.line(QueenBenchmark.figure("consume_claim_p50_ms", s.p(0.5), "ms"));
    b.line(QueenBenchmark.figure("consume_claim_p99_ms", s.p(0.99), "ms"));
    b.line(QueenBenchmark.figure("consume_claim_settle_p99_ms", settleP99, "ms"));
  }

  void deadTuplesHeldXmin() throws Exception {
    Duration window = b.options().heldWindow();
    Steady queenS = queenSteady("deadtup", 2000, 1, WORKERS, b.options().warmup(), window, true);
    Steady rawS = rawSteady("deadtup", 2000, b.options().warmup(), window, true);
    long qDead = queenS.dead("cursors") + queenS.dead("partitions") + queenS.dead("messages");
    long rDead = rawS.dead(QueenBenchmark.RAW_TABLE);
    b.say(String.format(Locale.ROOT, "  new dead tuples with the xmin horizon held: Queen cursors %,d, partitions %,d,"
        + " messages %,d; raw %,d", queenS.dead("cursors"), queenS.dead("partitions"), queenS.dead("messages"), rDead));
    b.say(String.format(Locale.ROOT, "  (with the horizon held, the steady Queen phase: %.0f msgs/s, claim p99 %.2f ms;"
        + " raw %.0f msgs/s)", queenS.rate(), queenS.p(0.99), rawS.rate()));
    cursorFigures(queenS, "2,000 msgs/s, xmin held, " + window.toSeconds() + " s");
    double ratio = (double) qDead / Math.max(1, rDead);
    b.row("dead_tuples_held_xmin", Long.toString(qDead), Long.toString(rDead), "tuples", QueenBenchmark.num(ratio, 3), "", "",
        "n_dead_tup added over " + window.toSeconds() + " s at 2,000 msgs/s, xmin held; Queen: cursors+partitions+messages;"
        + " raw: its table");
    b.line(QueenBenchmark.figure("dead_tuples_held_xmin", qDead, "tuples"));
    b.line(QueenBenchmark.figure("dead_tuples_held_xmin_raw", rDead, "tuples"));
  }

  void heldXminThroughput() throws Exception {
    Steady clean = queenSteady("clean", 800, 2, 8, b.options().warmup(), b.options().steadyWindow(), false);
    Steady held = queenSteady("held", 800, 2, 8, b.options().warmup(), b.options().heldWindow(), true);
    // against the rate asked for: a push slowed by the held horizon is Queen's slowdown too, not a lighter load
    double ratio = held.rate() / 800;
    b.say(String.format(Locale.ROOT, "  clean: %.0f of %.0f msgs/s, p99 %.2f ms; held: %.0f of %.0f msgs/s, p99 %.2f ms",
        clean.rate(), clean.offered(), clean.p(0.99), held.rate(), held.offered(), held.p(0.99)));
    boolean met = ratio >= 0.98 && held.p(0.99) <= 2 * clean.p(0.99);
    b.row("held_xmin_throughput", QueenBenchmark.num(held.rate(), 0), "800", "msgs/s",
        QueenBenchmark.num(ratio, 3), ">= 0.98", QueenBenchmark.verdict(met), "2 nodes x 8 workers, 800 msgs/s asked ("
        + QueenBenchmark.num(held.offered(), 0) + " offered), xmin held "
        + b.options().heldWindow().toSeconds() + " s; claim p99 " + QueenBenchmark.num(held.p(0.99), 2) + " ms vs "
        + QueenBenchmark.num(clean.p(0.99), 2) + " ms clean (target <= 2x)");
    b.line("RATIO held_xmin_throughput " + QueenBenchmark.num(ratio, 3));
    b.line(QueenBenchmark.figure("held_xmin_claim_p99_ms", held.p(0.99), "ms"));
    b.line(QueenBenchmark.figure("clean_claim_p99_ms", clean.p(0.99), "ms"));
  }

  // ------------------------------------------------------------------------------------------------ helpers

  /** One message in each partition, so they all exist and the group's cursors are made on subscribe. */
  private void prime(QueueClient queue) {
    List<PushItem> items = new ArrayList<>(PARTITIONS);
    for (int i = 0; i < PARTITIONS; i++) {
      items.add(PushItem.of(names[i], Json.of(b.payloads().get(i))));
    }
    queue.push(items);
  }

  /** Queen instances of their own, each with a pool and a meter registry, closed together. */
  private final class Nodes implements AutoCloseable {
    final List<HikariDataSource> pools = new ArrayList<>();
    final List<Queen> queens = new ArrayList<>();
    final List<SimpleMeterRegistry> registries = new ArrayList<>();
    boolean closed;

    Nodes(int count, int poolSize) {
      for (int i = 0; i < count; i++) {
        HikariDataSource pool = b.db().newDataSource(poolSize);
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        pools.add(pool);
        registries.add(registry);
        queens.add(EmbeddedQueen.builder().dataSource(pool).nodeId("bench-engine-" + (++nodeCounter)).meterRegistry(registry)
            .start());
      }
    }

    Queen queen(int i) {
      return queens.get(i);
    }

    /** {all pops, empty pops} of every node's consume loops. */
    double[] pops() {
      double all = 0;
      double empty = 0;
      for (SimpleMeterRegistry r : registries) {
        for (Counter c : r.find("queen.consumer.pops").counters()) {
          all += c.count();
          if ("empty".equals(c.getId().getTag("outcome"))) {
            empty += c.count();
          }
        }
      }
      return new double[] {all, empty};
    }

    void deleteQueue(String q) {
      b.deleteQueue(queens.get(0), q);
    }

    void closeAll() {
      if (closed) {
        return;
      }
      closed = true;
      for (Queen q : queens) {
        q.close();
      }
      pools.forEach(HikariDataSource::close);
    }

    @Override
    public void close() {
      closeAll();
    }
  }

  /** The raw queue: producers inserting into the raw table, workers deleting with SKIP LOCKED, one connection each. */
  private final class RawQueue implements AutoCloseable {
    static final String INSERT_MANY = "INSERT INTO " + QueenBenchmark.RAW_TABLE
        + " (partition, payload) SELECT p, j::jsonb FROM unnest(?::text[], ?::text[]) AS u(p, j)";
    static final String INSERT_ONE = "INSERT INTO " + QueenBenchmark.RAW_TABLE + " (partition, payload) VALUES (?, ?::jsonb)";
    static final String TAKE = "DELETE FROM " + QueenBenchmark.RAW_TABLE + " WHERE id IN (SELECT id FROM "
        + QueenBenchmark.RAW_TABLE + " ORDER BY id LIMIT " + RAW_TAKE + " FOR UPDATE SKIP LOCKED) RETURNING id, partition,"
        + " payload, created_at";
    final HikariDataSource pool;
    final ExecutorService threads;
    final AtomicBoolean stop = new AtomicBoolean();
    final AtomicLong polls = new AtomicLong();
    final AtomicLong emptyPolls = new AtomicLong();
    final Semaphore signal = new Semaphore(0);
    final List<Future<?>> futures = new ArrayList<>();
    final ThreadLocal<PreparedStatement[]> inserts = new ThreadLocal<>();
    final List<Connection> pinned = java.util.Collections.synchronizedList(new ArrayList<>());
    boolean closed;

    RawQueue(int producers, int workers, AtomicLong deleted) {
      pool = b.db().newDataSource(producers + workers);
      threads = Executors.newFixedThreadPool(producers + workers, ThroughputRunner.named("bench-raw"));
      for (int w = 0; w < workers; w++) {
        futures.add(threads.submit(() -> {
          try (Connection c = pool.getConnection(); PreparedStatement ps = c.prepareStatement(TAKE)) {
            c.setAutoCommit(true);
            while (!stop.get()) {
              int n = 0;
              try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                  rs.getLong(1);
                  rs.getString(2);
                  rs.getString(3);
                  rs.getTimestamp(4);
                  n++;
                }
              }
              polls.incrementAndGet();
              if (n == 0) {
                emptyPolls.incrementAndGet();
                // as Queen's loop: wait for a local push (or the poll interval), never spin on an empty table
                signal.tryAcquire(RAW_IDLE_MILLIS, TimeUnit.MILLISECONDS);
              } else {
                deleted.addAndGet(n);
              }
            }
          }
          return null;
        }));
      }
      this.producersLeft = producers;
    }

    int producersLeft;

    /** One producer thread inserting batches made by {@code batch(k)} until closed. */
    void startProducer(java.util.function.LongFunction<String[][]> batch, long unused) {
      futures.add(threads.submit(() -> {
        try (Connection c = pool.getConnection(); PreparedStatement ps = c.prepareStatement(INSERT_MANY)) {
          c.setAutoCommit(true);
          for (long k = 0; !stop.get(); k++) {
            String[][] rows = batch.apply(k);
            Array a = c.createArrayOf("text", rows[0]);
            Array t = c.createArrayOf("text", rows[1]);
            ps.setArray(1, a);
            ps.setArray(2, t);
            ps.executeUpdate();
            wake(rows[0].length);
          }
        }
        return null;
      }));
    }

    private void wake(int n) {
      int missing = WORKERS - signal.availablePermits();
      if (missing > 0) {
        signal.release(Math.min(n, missing));
      }
    }

    /**
     * Messages {@code seq ..} as one autocommit statement on the calling pusher thread's own connection: a single-row
     * INSERT, or an unnest INSERT of {@code count} rows.
     */
    void insert(long seq, int count) throws SQLException {
      PreparedStatement[] ps = inserts.get();
      if (ps == null) {
        Connection c = pool.getConnection();
        pinned.add(c);
        c.setAutoCommit(true);
        ps = new PreparedStatement[] {c.prepareStatement(INSERT_ONE), c.prepareStatement(INSERT_MANY)};
        inserts.set(ps);
      }
      long t = System.nanoTime();
      if (count == 1) {
        ps[0].setString(1, names[(int) (seq % PARTITIONS)]);
        ps[0].setString(2, Payloads.stamped(seq, t));
        ps[0].executeUpdate();
      } else {
        String[] parts = new String[count];
        String[] texts = new String[count];
        for (int i = 0; i < count; i++) {
          parts[i] = names[(int) ((seq + i) % PARTITIONS)];
          texts[i] = Payloads.stamped(seq + i, t);
        }
        Connection c = ps[1].getConnection();
        ps[1].setArray(1, c.createArrayOf("text", parts));
        ps[1].setArray(2, c.createArrayOf("text", texts));
        ps[1].executeUpdate();
      }
      wake(count);
    }

    @Override
    public void close() throws Exception {
      if (closed) {
        return;
      }
      closed = true;
      stop.set(true);
      signal.release(WORKERS * 2);
      for (Future<?> f : futures) {
        f.get(60, TimeUnit.SECONDS);
      }
      ThroughputRunner.shutdown(threads, "raw");
      for (Connection c : pinned) {
        c.close();
      }
      pool.close();
    }
  }

  /** Pushes messages {@code seq .. seq + count - 1}, one commit. */
  @FunctionalInterface
  interface Push {
    void push(long seq, int count) throws Exception;
  }

  /**
   * Messages per push at a rate: single messages up to 1,000 msgs/s; above, groups of {@value #GROUP} (each message to the
   * next partition round-robin), because {@value #PUSHERS} threads of single-message commits do not reach 2,000 msgs/s on
   * this 2-core machine (~500 msgs/s measured under load).
   */
  static int perPush(int rate) {
    return rate > 1000 ? GROUP : 1;
  }

  static final int GROUP = 8;

  /** {@value #PUSHERS} threads pushing sequence numbers 0..total-1 on a fixed schedule. */
  private static final class Paced {
    /** The most messages one push takes when the pushers are behind schedule. */
    static final int CATCH_UP = 128;
    final ExecutorService threads = Executors.newFixedThreadPool(PUSHERS, ThroughputRunner.named("bench-paced"));
    final List<Future<?>> futures = new ArrayList<>();
    final long start;
    final long interval;
    final long[] pushedAt;
    final AtomicLong next = new AtomicLong();

    Paced(int rate, long total, Push push) {
      interval = 1_000_000_000L / rate;
      start = System.nanoTime() + 20_000_000L;
      pushedAt = new long[(int) total];
      int group = perPush(rate);
      for (int t = 0; t < PUSHERS; t++) {
        futures.add(threads.submit(() -> {
          while (true) {
            long seq = next.get();
            if (seq >= total) {
              return null;
            }
            long due = start + seq * interval;
            long wait;
            while ((wait = due - System.nanoTime()) > 0) {
              LockSupport.parkNanos(wait);
            }
            // on schedule: `group` messages; behind it (pushes slower than the schedule): everything due, up to
            // CATCH_UP, in one push, as a producer with a backlog would, so the rate offered stays the one asked for
            long dueNow = (System.nanoTime() - start) / interval + 1;
            int count = (int) Math.min(total - seq, Math.max(group, Math.min(CATCH_UP, dueNow - seq)));
            if (!next.compareAndSet(seq, seq + count)) {
              continue;
            }
            push.push(seq, count);
            long now = System.nanoTime();
            for (int i = 0; i < count; i++) {
              pushedAt[(int) seq + i] = now;
            }
          }
        }));
      }
    }

    void awaitDone(Duration max) throws Exception {
      long deadline = System.nanoTime() + max.toNanos();
      for (Future<?> f : futures) {
        f.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      }
      ThroughputRunner.shutdown(threads, "paced");
    }

    /** The rate reached from message {@code first} on: messages over the time from its due time to the last push. */
    double offered(long first) {
      long last = 0;
      for (long t : pushedAt) {
        last = Math.max(last, t);
      }
      long from = start + first * interval;
      return (pushedAt.length - first) * 1e9 / Math.max(1, last - from);
    }
  }

  /** A connection that holds the xmin horizon: a repeatable-read transaction that has taken its snapshot. */
  private final class XminHolder implements AutoCloseable {
    final Connection c;

    XminHolder() throws SQLException {
      c = b.db().connection();
      try (Statement s = c.createStatement()) {
        s.execute("begin isolation level repeatable read");
        s.execute("select 1");
      }
    }

    @Override
    public void close() throws SQLException {
      try (Statement s = c.createStatement()) {
        s.execute("rollback");
      } finally {
        c.close();
      }
    }
  }

  // ----------------------------------------------------------------------------------------- server counters

  private record Snapshot(double cpuAll, double cpuBackends, Map<String, long[]> tables) {}

  private Snapshot snapshot() throws SQLException {
    double[] cpu = serverCpu();
    return new Snapshot(cpu[0], cpu[1], tables());
  }

  private Snapshot tablesOnly() throws SQLException {
    return new Snapshot(0, 0, tables());
  }

  private static Map<String, long[]> diff(Map<String, long[]> a, Map<String, long[]> c) {
    Map<String, long[]> out = new LinkedHashMap<>();
    for (var e : c.entrySet()) {
      long[] before = a.getOrDefault(e.getKey(), new long[e.getValue().length]);
      long[] d = new long[e.getValue().length];
      for (int i = 0; i < d.length; i++) {
        d[i] = e.getValue()[i] - before[i];
      }
      out.put(e.getKey(), d);
    }
    return out;
  }

  /** {n_tup_upd, n_tup_hot_upd, n_dead_tup} of Queen's hot tables and of the raw table. */
  private Map<String, long[]> tables() throws SQLException {
    Map<String, long[]> out = new LinkedHashMap<>();
    try (Connection c = b.db().connection(); PreparedStatement ps = c.prepareStatement("select relname, n_tup_upd,"
        + " n_tup_hot_upd, n_dead_tup from pg_stat_user_tables where (schemaname = ? and relname = any(?))"
        + " or (schemaname = 'public' and relname = ?)")) {
      ps.setString(1, SCHEMA);
      ps.setArray(2, c.createArrayOf("text", HOT_TABLES.toArray()));
      ps.setString(3, QueenBenchmark.RAW_TABLE);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getString(1), new long[] {rs.getLong(2), rs.getLong(3), rs.getLong(4)});
        }
      }
    }
    return out;
  }

  private static final double TICKS = 100.0; // USER_HZ on Linux

  /** Seconds of CPU: {all of the server (postmaster, its live children, and its reaped children), backends of this DB}. */
  private double[] serverCpu() throws SQLException {
    List<Long> backends = new ArrayList<>();
    try (Connection c = b.db().connection(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
        "select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend'")) {
      while (rs.next()) {
        backends.add(rs.getLong(1));
      }
    }
    double back = 0;
    long postmaster = -1;
    for (long pid : backends) {
      long[] st = stat(pid);
      if (st != null) {
        back += (st[1] + st[2]) / TICKS;
        postmaster = st[0];
      }
    }
    double all = 0;
    if (postmaster > 0) {
      long[] pm = stat(postmaster);
      all += (pm[1] + pm[2] + pm[3] + pm[4]) / TICKS;
      try (DirectoryStream<Path> procs = Files.newDirectoryStream(Path.of("/proc"), "[0-9]*")) {
        for (Path p : procs) {
          long[] st = stat(Long.parseLong(p.getFileName().toString()));
          if (st != null && st[0] == postmaster) {
            all += (st[1] + st[2]) / TICKS;
          }
        }
      } catch (IOException e) {
        throw new IllegalStateException("cannot list /proc", e);
      }
    }
    return new double[] {all, back};
  }

  /** {ppid, utime, stime, cutime, cstime} of a process, or null when it is gone or not readable. */
  private static long[] stat(long pid) {
    try {
      String s = Files.readString(Path.of("/proc/" + pid + "/stat"));
      String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
      return new long[] {Long.parseLong(f[1]), Long.parseLong(f[11]), Long.parseLong(f[12]), Long.parseLong(f[13]),
          Long.parseLong(f[14])};
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  private boolean cpuReadable() throws SQLException {
    return serverCpu()[0] > 0;
  }

  private String statStatementsAvailable() throws SQLException {
    try (Connection c = b.db().connection(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
        "select count(*), current_setting('shared_preload_libraries') from pg_available_extensions"
            + " where name = 'pg_stat_statements'")) {
      rs.next();
      return (rs.getInt(1) > 0 ? "shipped" : "not shipped") + ", shared_preload_libraries='" + rs.getString(2) + "'";
    }
  }
}
