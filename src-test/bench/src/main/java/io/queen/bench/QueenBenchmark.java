package io.queen.bench;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.AckResult;
import io.queen.CommitResult;
import io.queen.ConsumerBuilder;
import io.queen.Json;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.QueueClient;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.Transaction;
import io.queen.bench.ThroughputRunner.Result;
import io.queen.bench.ThroughputRunner.Window;
import io.queen.bench.ThroughputRunner.Worker;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.PostgresServer;
import io.queen.testkit.TestDatabase;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;

/**
 * The benchmark: every Queen figure is measured side by side with a raw-JDBC baseline in the same run,
 * on the same database, with the same number of threads. Prints a table, then one line per figure:
 * {@code RATIO <name> <value>} and {@code FIGURE <name> <value> <unit>}. Besides push, pop and ack it measures the cost
 * of an idempotency marker to a consumer ({@code once_ack_overhead}: once() + ack in one bundle against a plain ack, on the
 * same backlog) and two KV rates ({@code kv_put}, {@code kv_incr_hot_key}).
 *
 * <pre>
 * mvn -q -B install -DskipTests
 * mvn -q -B -pl src-test/bench exec:java [-Dexec.args="--only push_batch1 --seconds 5"]
 * </pre>
 *
 * <p>Options: {@code --only name,name} ({@value #NAMES_TEXT}), {@code --seconds N} (timed window of each throughput phase,
 * default 8), {@code --warmup N} (seconds, default 2), {@code --jit-warmup N} (seconds of unmeasured pushes on both
 * sides before the first push phase, default 12; 0 skips it, and also the unmeasured first pass of source_vs_raw's load),
 * {@code --scale X} (multiplies the pop+ack backlog and the
 * partition count of pop_100k_vs_10, default 1), {@code --popack-partitions N}, {@code --latency-rate N}, {@code --latency-seconds N},
 * {@code --latency-batch N}, {@code --latency-partitions N}, {@code --source-latency-seconds N} (latency_source's measured
 * window, default 60), {@code --source-latency-updates} (latency_source: each row updated in a commit of its own right
 * after its insert, so every key gets two changes 2 ms apart), {@code --sustained-minutes N} (sustained_push_pop, default 10),
 * {@code --long} (also the figures of more than a minute each), and {@code --diagnose} (print the top PostgreSQL wait events
 * and the WAL per message of every phase; the push phases print their WAL per message as {@code FIGURE} lines anyway).
 *
 * <p>push_batch1000 measures batches of 1,000 against a raw COPY, push_hot_partition (8 threads into one partition
 * against the same threads over 1,000) and, with {@code --long}, sustained_push_pop (producers and consumers with retention
 * for 10 minutes, per-minute rates).
 *
 * <p>PostgreSQL: the test kit's embedded server, or {@code QUEEN_TEST_JDBC_URL} (+ {@code _USER}/{@code _PASSWORD}) when set. A fresh
 * database is created and dropped at the end.
 *
 * <p>Method. Each throughput phase starts from a vacuumed, analysed, checkpointed database and a fresh queue (Queen) or an empty
 * table (raw); it runs {@value #THREADS} threads from a fixed pool, discards a warm-up, and counts messages completed inside the
 * timed window divided by its length. Before the first push phase both sides' push code runs unmeasured for
 * {@code --jit-warmup} seconds, so that no push phase measures the just-in-time compiler at work. The raw baselines are
 * the fastest honest plain-JDBC way to do the same work: one
 * autocommit statement per batch (a single statement is its own transaction, so it saves the BEGIN/COMMIT round trips that
 * any multi-statement broker operation pays), server-side prepared after pgjdbc's threshold, one pinned connection per thread.
 */
public final class QueenBenchmark {

  static final int THREADS = 4;
  static final int PARTITIONS = 1_000;
  static final int BATCH = 100;
  static final int PARTITIONS_PER_BATCH = 10;
  static final int ONCE_PARTITIONS = 100;
  static final int POPACK_ROUNDS = 10;
  static final int ONCE_BATCH = 10;
  static final int ONCE_ROUND = 5_000;
  static final int ONCE_ROUNDS = 20;
  /**
   * Untimed rounds per side before those: three, because in a full run the plain side's code (pop, ack) is already
   * compiled by the earlier phases and the once side's is not; one round measured the compiler on the once side only.
   */
  static final int ONCE_WARMUP_ROUNDS = 3;
  /** Per partition: the untimed rounds, the measured ones, and a round to spare (batches in flight when a round stops). */
  static final int ONCE_DEPTH = (ONCE_WARMUP_ROUNDS + ONCE_ROUNDS + 1) * ONCE_ROUND / ONCE_PARTITIONS;
  /** push_batch1000: items per push, and partitions per push (100 items each). */
  static final int BIG_BATCH = 1_000;
  static final int BIG_BATCH_PARTITIONS = 10;
  /** push_hot_partition: producer threads, and items per push. */
  static final int HOT_THREADS = 8;
  static final int HOT_BATCH = 10;
  /** sustained_push_pop: partitions of the queue; producers push 100 over 10 of them, consumers pop 100 over 10. */
  static final int SUSTAINED_PARTITIONS = 100;
  static final List<String> NAMES = List.of("push_batch100", "push_batch1", "push_batch1000", "push_hot_partition",
      "sustained_push_pop", "popack_batch100", "latency", "latency_fresh", "pop_100k_vs_10",
      "once_ack_overhead", "kv_put", "kv_incr_hot_key", "consume_pops", "consume_vs_raw", "consume_claim", "e2e_vs_raw_queue",
      "dead_tuples_held_xmin", "held_xmin_throughput", "sink_upsert", "retention_push_impact", "source_vs_raw",
      "source_other_db", "http_vs_java", "latency_source");
  /** Figures of more than about a minute each: run with --long, or by name with --only. */
  static final Set<String> LONG = Set.of("e2e_vs_raw_queue", "dead_tuples_held_xmin", "held_xmin_throughput",
      "sustained_push_pop", "source_other_db", "latency_source");
  static final String NAMES_TEXT = "push_batch100, push_batch1, push_batch1000, push_hot_partition, sustained_push_pop, "
      + "popack_batch100, latency, latency_fresh, pop_100k_vs_10, once_ack_overhead, "
      + "kv_put, kv_incr_hot_key, consume_pops, consume_vs_raw, consume_claim, e2e_vs_raw_queue, dead_tuples_held_xmin, "
      + "held_xmin_throughput, sink_upsert, retention_push_impact, source_vs_raw, source_other_db, http_vs_java, latency_source";
  /** Other figure names that --only accepts, each for the phase that prints it. */
  static final java.util.Map<String, String> ALIASES = java.util.Map.of("consume_pops_per_message", "consume_pops",
      "consume_empty_pop_share", "consume_pops", "consume_claim_p50_ms", "consume_claim", "consume_claim_p99_ms",
      "consume_claim", "cursor_updates_per_message", "consume_vs_raw", "cursor_hot_share", "consume_vs_raw");

  static final String RAW_TABLE = "bench_raw";
  private static final String RAW_DDL = "CREATE TABLE " + RAW_TABLE + " (id bigserial PRIMARY KEY, partition text NOT NULL, "
      + "payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())";

  /** Parsed command line. */
  record Options(Set<String> only, Duration window, Duration warmup, double scale, int popackPartitions, int latencyRate,
      Duration latencyWindow, int latencyBatch, int latencyPartitions, boolean diagnose, Duration e2eWindow,
      Duration steadyWindow, Duration heldWindow, int sustainedMinutes, Duration jitWarmup, Duration sourceLatencyWindow,
      boolean sourceLatencyUpdates) {

    static Options parse(String[] args) {
      Set<String> only = null;
      boolean runLong = false;
      double e2eSeconds = 60;
      double steadySeconds = 20;
      double heldSeconds = 60;
      int sustainedMinutes = 10;
      double seconds = 8;
      double warmup = 2;
      double jitWarmup = 12;
      double scale = 1;
      int popackPartitions = 0;
      int latencyRate = 500;
      double latencySeconds = 10;
      double sourceLatencySeconds = 60;
      boolean sourceLatencyUpdates = false;
      int latencyBatch = 10;
      int latencyPartitions = 10;
      boolean diagnose = false;
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("--help") || a.equals("-h")) {
          throw new UsageException(null);
        }
        if (a.equals("--diagnose")) {
          diagnose = true;
          continue;
        }
        if (a.equals("--source-latency-updates")) {
          sourceLatencyUpdates = true;
          continue;
        }
        if (a.equals("--long")) {
          runLong = true;
          continue;
        }
        if (!a.startsWith("--")) {
          throw new UsageException("unexpected argument '" + a + "'");
        }
        String key = a;
        String value;
        int eq = a.indexOf('=');
        if (eq > 0) {
          key = a.substring(0, eq);
          value = a.substring(eq + 1);
        } else if (i + 1 < args.length) {
          value = args[++i];
        } else {
          throw new UsageException(a + " needs a value");
        }
        try {
          switch (key) {
            case "--only" -> {
              only = new LinkedHashSet<>();
              for (String n : value.split(",")) {
                String name = n.trim();
                name = ALIASES.getOrDefault(name, name);
                if (name.startsWith("latency_fresh")) {
                  name = "latency_fresh";
                } else if (name.startsWith("latency_source")) {
                  name = "latency_source";
                } else if (name.startsWith("latency")) {
                  name = "latency";
                }
                // the figures' own names are accepted too: kv_put_per_s, kv_incr_hot_key_per_s
                if (name.endsWith("_per_s") && NAMES.contains(name.substring(0, name.length() - "_per_s".length()))) {
                  name = name.substring(0, name.length() - "_per_s".length());
                }
                if (!NAMES.contains(name)) {
                  throw new UsageException("--only: unknown figure '" + n.trim() + "' (known: " + NAMES_TEXT + ")");
                }
                only.add(name);
              }
            }
            case "--seconds" -> seconds = range(key, Double.parseDouble(value), 0.5, 3600);
            case "--warmup" -> warmup = range(key, Double.parseDouble(value), 0, 600);
            case "--jit-warmup" -> jitWarmup = range(key, Double.parseDouble(value), 0, 600);
            case "--scale" -> scale = range(key, Double.parseDouble(value), 0.01, 100);
            case "--popack-partitions" -> popackPartitions = (int) range(key, Integer.parseInt(value), 1, 1000);
            case "--latency-rate" -> latencyRate = (int) range(key, Integer.parseInt(value), 1, 100_000);
            case "--latency-seconds" -> latencySeconds = range(key, Double.parseDouble(value), 1, 3600);
            case "--source-latency-seconds" -> sourceLatencySeconds = range(key, Double.parseDouble(value), 1, 3600);
            case "--latency-batch" -> latencyBatch = (int) range(key, Integer.parseInt(value), 1, 10_000);
            case "--latency-partitions" -> latencyPartitions = (int) range(key, Integer.parseInt(value), 1, 1000);
            case "--e2e-seconds" -> e2eSeconds = range(key, Double.parseDouble(value), 1, 3600);
            case "--steady-seconds" -> steadySeconds = range(key, Double.parseDouble(value), 1, 3600);
            case "--held-seconds" -> heldSeconds = range(key, Double.parseDouble(value), 1, 3600);
            case "--sustained-minutes" -> sustainedMinutes = (int) range(key, Integer.parseInt(value), 2, 600);
            default -> throw new UsageException("unknown option " + key);
          }
        } catch (NumberFormatException e) {
          throw new UsageException(key + ": not a number: '" + value + "'");
        }
      }
      if (only == null) {
        only = new LinkedHashSet<>(NAMES);
        if (!runLong) {
          only.removeAll(LONG);
        }
      }
      return new Options(only, millis(seconds), millis(warmup), scale, popackPartitions, latencyRate, millis(latencySeconds),
          latencyBatch, latencyPartitions, diagnose, millis(e2eSeconds), millis(steadySeconds), millis(heldSeconds),
          sustainedMinutes, millis(jitWarmup), millis(sourceLatencySeconds),
          sourceLatencyUpdates);
    }

    private static double range(String key, double v, double min, double max) {
      if (!(v >= min && v <= max)) {
        throw new UsageException(key + " must be between " + fmt(min) + " and " + fmt(max) + ", was " + fmt(v));
      }
      return v;
    }

    private static Duration millis(double seconds) {
      return Duration.ofMillis(Math.round(seconds * 1000));
    }

    private static String fmt(double v) {
      return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
    }
  }

  static final class UsageException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  /** One line of the table. */
  private record Row(String name, String queen, String baseline, String unit, String ratio, String target, String verdict,
      String note) {}

  private final Options options;
  private final String runId;
  private final Payloads payloads = new Payloads(4096, 42);
  private final String[] partitionNames = new String[PARTITIONS];
  private final List<Row> rows = new ArrayList<>();
  private final List<String> lines = new ArrayList<>();
  private final List<String> failures = new ArrayList<>();
  private TestDatabase db;
  /** WAL bytes per message of the last {@link #measure} (all WAL the server wrote meanwhile, over every message done). */
  private double lastWalPerMessage;
  /** COPY text lines of the payloads, made once (rawCopyWorker). */
  private byte[][] copyLines;
  private HikariDataSource queenPool;
  private HikariDataSource rawPool;
  private Queen queen;

  private QueenBenchmark(Options options) {
    this.options = options;
    this.runId = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36);
    for (int i = 0; i < PARTITIONS; i++) {
      partitionNames[i] = String.format(Locale.ROOT, "p%04d", i);
    }
  }

  public static void main(String[] args) {
    // The embedded server and the pools log every start line at INFO; keep the table readable unless told otherwise.
    // Must run before the first logger is made.
    quiet("io.zonky");
    quiet("com.zaxxer.hikari");
    Options options;
    try {
      options = Options.parse(args);
    } catch (UsageException e) {
      if (e.getMessage() != null) {
        System.err.println("error: " + e.getMessage());
      }
      System.err.println("usage: QueenBenchmark [--only " + String.join(",", NAMES) + "] [--seconds 8] [--warmup 2]"
          + " [--jit-warmup 12] [--scale 1]"
          + " [--popack-partitions N] [--latency-rate 500] [--latency-seconds 10] [--source-latency-seconds 60] [--source-latency-updates]"
          + " [--latency-batch 10]"
          + " [--latency-partitions 10] [--e2e-seconds 60] [--steady-seconds 20] [--held-seconds 60] [--sustained-minutes 10]"
          + " [--long] [--diagnose]");
      System.exit(e.getMessage() == null ? 0 : 2);
      return;
    }
    int status;
    try {
      status = new QueenBenchmark(options).run();
    } catch (Throwable t) {
      t.printStackTrace();
      status = 1;
    }
    System.out.flush();
    // exec:java runs main inside Maven's JVM and would wait for any stray non-daemon thread; exiting also runs the kit's
    // shutdown hook that stops the embedded PostgreSQL.
    System.exit(status);
  }

  private static void quiet(String logger) {
    String key = "org.slf4j.simpleLogger.log." + logger;
    if (System.getProperty(key) == null) {
      System.setProperty(key, "warn");
    }
  }

  /** Null when the server can run the source connector; else what it lacks. */
  private static String noSource(PostgresServer server) {
    String walLevel = server.setting("wal_level");
    if (server.serverVersionNum() < 170000 || !"logical".equals(walLevel)) {
      return "this server is PostgreSQL " + server.setting("server_version") + " with wal_level=" + walLevel;
    }
    return null;
  }

  /** What {@link JitCheck} found, printed after the table. */
  private final List<String> jitLines = new ArrayList<>();

  private int run() throws Exception {
    long started = System.nanoTime();
    PostgresServer server = PostgresServer.get();
    say("Queen benchmark, run " + runId);
    say("PostgreSQL: " + server.describe() + " (fsync=" + server.setting("fsync") + ", synchronous_commit="
        + server.setting("synchronous_commit") + ", shared_buffers=" + server.setting("shared_buffers") + ", jit="
        + server.setting("jit") + ")");
    say("Machine: " + Runtime.getRuntime().availableProcessors() + " cores, Java " + System.getProperty("java.version") + ", "
        + System.getProperty("os.name") + " " + System.getProperty("os.arch"));
    say("Threads per side: " + THREADS + "; warm-up " + options.warmup().toMillis() / 1000.0 + " s; window "
        + options.window().toMillis() / 1000.0 + " s; scale " + options.scale() + "; figures: " + String.join(", ", options.only()));
    try {
      db = server.createDatabase("bench");
      JitCheck jitCheck = JitCheck.prepare(db);
      queenPool = db.newDataSource(16);
      rawPool = db.newDataSource(Math.max(THREADS, HOT_THREADS) + 1);
      try (Connection c = db.connection(); Statement s = c.createStatement()) {
        s.execute(RAW_DDL);
      }
      // a key for the connector documents' passwords (source_vs_raw's second source has one); no queue is encrypted
      byte[] key = new byte[32];
      new java.security.SecureRandom().nextBytes(key);
      queen = EmbeddedQueen.builder().dataSource(queenPool).nodeId("bench")
          .encryptionKey(java.util.HexFormat.of().formatHex(key)).start();
      EngineBench engine = new EngineBench(this);
      if (options.only().stream().anyMatch(PUSH_PHASES::contains) && !options.jitWarmup().isZero()) {
        jitWarmup();
      }
      for (String name : options.only()) {
        say("");
        say("== " + name);
        try {
          switch (name) {
            case "push_batch100" -> pushBatch100();
            case "push_batch1" -> pushBatch1();
            case "push_batch1000" -> pushBatch1000();
            case "push_hot_partition" -> pushHotPartition();
            case "sustained_push_pop" -> sustainedPushPop();
            case "popack_batch100" -> popAckBatch100();
            case "latency" -> latency(false);
            case "latency_fresh" -> latency(true);
            case "pop_100k_vs_10" -> popScale();
            case "once_ack_overhead" -> onceAckOverhead();
            case "kv_put" -> kvPut();
            case "kv_incr_hot_key" -> kvIncrHotKey();
            case "consume_pops" -> engine.consumePops();
            case "consume_vs_raw" -> engine.consumeVsRaw();
            case "consume_claim" -> engine.consumeClaim();
            case "e2e_vs_raw_queue" -> engine.e2eVsRawQueue();
            case "dead_tuples_held_xmin" -> engine.deadTuplesHeldXmin();
            case "held_xmin_throughput" -> engine.heldXminThroughput();
            case "sink_upsert" -> new SinkBench(this).sinkUpsert();
            case "retention_push_impact" -> retentionPushImpact();
            case "http_vs_java" -> new HttpBench(this).httpVsJava();
            case "source_vs_raw", "source_other_db", "latency_source" -> {
              String why = noSource(server);
              if (why != null) {
                say("  skipped: the source connector needs PostgreSQL 17 or later with wal_level=logical; " + why);
                rows.add(new Row(name, "-", "-", "", "-", "", "skipped", why));
              } else if (name.equals("source_vs_raw")) {
                new SourceBench(this).sourceVsRaw();
              } else if (name.equals("latency_source")) {
                new SourceBench(this).latencySource();
              } else {
                new SourceBench(this).sourceOtherDb();
              }
            }
            default -> throw new IllegalStateException(name);
          }
        } catch (Exception e) {
          failures.add(name + ": " + e);
          rows.add(new Row(name, "-", "-", "", "-", "", "FAILED", e.getMessage()));
          System.out.println("  FAILED: " + e);
          e.printStackTrace(System.out);
        }
      }
      if (queen != null) {
        queen.close(); // its last statements count too
      }
      jitLines.addAll(jitCheck.report(db, failures));
    } finally {
      closeAll();
    }
    printTable();
    jitLines.forEach(QueenBenchmark::say);
    say(String.format(Locale.ROOT, "Total time %.1f s", (System.nanoTime() - started) / 1e9));
    for (String f : failures) {
      say("FAILED " + f);
    }
    return failures.isEmpty() ? 0 : 1;
  }

  // ---------------------------------------------------------------------------------------------------------------- push

  /**
   * The phases after whose first {@link #jitWarmup()} runs: the four push phases, and sustained_push_pop (whose ratio,
   * last minute ÷ first, would otherwise gain from the compiler's share of its first minute).
   */
  static final Set<String> PUSH_PHASES = Set.of("push_batch100", "push_batch1", "push_batch1000", "push_hot_partition",
      "sustained_push_pop");

  /**
   * Runs the push phases' code on both sides, unmeasured, for {@code --jit-warmup} seconds (default 12) before the
   * first of {@link #PUSH_PHASES}, half on each side: Queen's pushes of 100 over 10 partitions, of one, of 1,000 over
   * 10 and of 10 into one partition from two threads, in turn; the raw side's 100-row and one-row INSERTs and its COPY
   * of 1,000, in turn. Each phase's own warm-up (2 s) is too short for the just-in-time compiler on 2 cores: in the
   * first push phase's window its threads took 0.43 of a core beside the 4 pushing threads' 0.34 (their 0.19 once
   * compiled). Without this, that phase measured Queen's code while it was being compiled and the raw side with
   * pgjdbc already compiled by Queen's run.
   */
  private void jitWarmup() throws Exception {
    Duration half = options.jitWarmup().dividedBy(2);
    say("");
    say("== JIT warm-up of the push code, " + options.jitWarmup().toMillis() / 1000.0 + " s (not measured)");
    String q = queueName("jit-warmup");
    prime(queen.queue(q), partitionNames);
    int per = BIG_BATCH / BIG_BATCH_PARTITIONS;
    measure("jit-warmup-queen", THREADS, i -> {
      QueueClient queue = queen.queue(q);
      SplittableRandom random = new SplittableRandom(500 + i);
      int[] turn = {i};
      return () -> {
        int shape = turn[0]++ % 4;
        int size = shape == 0 ? BATCH : shape == 1 ? 1 : shape == 2 ? BIG_BATCH : HOT_BATCH;
        int[] parts = pickDistinct(random, PARTITIONS, BIG_BATCH_PARTITIONS);
        List<PushItem> items = new ArrayList<>(size);
        for (int k = 0; k < size; k++) {
          String partition = shape == 3 ? "p-hot-" + (i % 2) : shape == 2 ? partitionNames[parts[k / per]]
              : partitionNames[parts[k / Math.max(1, size / PARTITIONS_PER_BATCH)]];
          items.add(PushItem.of(partition, Json.of(payloads.get(random.nextInt()))));
        }
        if (shape == 1) {
          queue.partition(items.get(0).partition()).push(items.get(0).payload());
        } else {
          queue.push(items);
        }
        return size;
      };
    }, Window.timed(Duration.ZERO, half));
    deleteQueue(q);
    String insert100 = multiRowInsert(BATCH);
    String insert1 = multiRowInsert(1);
    measure("jit-warmup-raw", THREADS, i -> {
      SplittableRandom random = new SplittableRandom(500 + i);
      Worker copy = rawCopyWorker(600 + i);
      Connection c = rawPool.getConnection();
      c.setAutoCommit(true);
      PreparedStatement ps100 = c.prepareStatement(insert100);
      PreparedStatement ps1 = c.prepareStatement(insert1);
      int[] turn = {i};
      return new Worker() {
        @Override
        public int step() throws Exception {
          int shape = turn[0]++ % 3;
          if (shape == 2) {
            return copy.step();
          }
          PreparedStatement ps = shape == 0 ? ps100 : ps1;
          int rows = shape == 0 ? BATCH : 1;
          for (int k = 0; k < rows; k++) {
            ps.setString(2 * k + 1, partitionNames[random.nextInt(PARTITIONS)]);
            ps.setString(2 * k + 2, payloads.get(random.nextInt()));
          }
          ps.executeUpdate();
          return rows;
        }

        @Override
        public void close() throws SQLException {
          try (c; ps100; ps1) {
            copy.close();
          }
        }
      };
    }, Window.timed(Duration.ZERO, half));
    truncateRaw();
  }

  /** Queen: batches of 100 payloads over 10 random partitions (10 each) of 1,000. Raw: the same rows in one multi-row INSERT. */
  private void pushBatch100() throws Exception {
    Window window = Window.timed(options.warmup(), options.window());
    String q = queueName("push100");
    prime(queen.queue(q), partitionNames);
    Result queenR = measure("push100-queen", THREADS, i -> {
      QueueClient queue = queen.queue(q);
      SplittableRandom random = new SplittableRandom(1000 + i);
      return () -> {
        int[] parts = pickDistinct(random, PARTITIONS, PARTITIONS_PER_BATCH);
        List<PushItem> items = new ArrayList<>(BATCH);
        for (int k = 0; k < BATCH; k++) {
          items.add(PushItem.of(partitionNames[parts[k / (BATCH / PARTITIONS_PER_BATCH)]], Json.of(payloads.get(random.nextInt()))));
        }
        queue.push(items);
        return BATCH;
      };
    }, window);
    double queenWal = lastWalPerMessage;
    progress("Queen", queenR);
    deleteQueue(q);

    settle();
    String sql = multiRowInsert(BATCH);
    Result rawR = measure("push100-raw", THREADS, i -> {
      SplittableRandom random = new SplittableRandom(1000 + i);
      return new RawWorker(rawPool, sql) {
        @Override
        public int step() throws SQLException {
          int[] parts = pickDistinct(random, PARTITIONS, PARTITIONS_PER_BATCH);
          for (int k = 0; k < BATCH; k++) {
            ps.setString(2 * k + 1, partitionNames[parts[k / (BATCH / PARTITIONS_PER_BATCH)]]);
            ps.setString(2 * k + 2, payloads.get(random.nextInt()));
          }
          ps.executeUpdate();
          return BATCH;
        }
      };
    }, window);
    progress("raw multi-row INSERT", rawR);
    double rawWal = lastWalPerMessage;
    truncateRaw();

    throughput("push_batch100", queenR, rawR, 0.60, "raw: one INSERT ... VALUES x100 per commit");
    walFigures("push_batch100", queenWal, rawWal);
  }

  /**
   * push_batch100 while the retention janitor deletes a large backlog of another queue, against push_batch100 without it,
   * in the same run (target: at least 0.9). The backlog (400,000 messages times --scale over 100 partitions, all
   * past retention and with no group holding them) is written by SQL before both windows; retention is switched on for
   * its queue only after the first window, and a thread then calls {@code runRetentionNow()} in a loop through the second.
   */
  private void retentionPushImpact() throws Exception {
    int backlog = (int) Math.max(20_000, 400_000 * options.scale());
    String old = queueName("retention-backlog");
    queen.queue(old).configure(c -> c);
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("insert into queen.partitions(queue_id, name, next_offset) select q.id, 'b' || g, " + backlog / 100
          + " from queen.queues q, generate_series(1, 100) g where q.name = '" + old + "'");
      st.execute("insert into queen.messages(partition_id, \"offset\", id, payload, created_at)"
          + " select p.id, o, gen_random_uuid(), '{\"order_id\": \"order-101\", \"amount\": 1250}'::jsonb,"
          + " now() - interval '2 days' from queen.partitions p join queen.queues q on q.id = p.queue_id,"
          + " generate_series(0, " + (backlog / 100 - 1) + ") o where q.name = '" + old + "'");
    }
    say(String.format(Locale.ROOT, "  backlog: %,d messages over 100 partitions, 2 days old", backlog));
    String q = queueName("retention-push");
    prime(queen.queue(q), partitionNames);
    ThroughputRunner.WorkerFactory pusher = i -> {
      QueueClient queue = queen.queue(q);
      SplittableRandom random = new SplittableRandom(9000 + i);
      return () -> {
        int[] parts = pickDistinct(random, PARTITIONS, PARTITIONS_PER_BATCH);
        List<PushItem> items = new ArrayList<>(BATCH);
        for (int k = 0; k < BATCH; k++) {
          items.add(PushItem.of(partitionNames[parts[k / (BATCH / PARTITIONS_PER_BATCH)]], Json.of(payloads.get(random.nextInt()))));
        }
        queue.push(items);
        return BATCH;
      };
    };
    settle();
    Result without = measure("retention-push-without", THREADS, pusher, Window.timed(options.warmup(), options.window()));
    progress("push_batch100, no janitor work", without);

    settle();
    queen.queue(old).configure(c -> c.retention(Duration.ofDays(1)));
    java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
    Thread janitor = new Thread(() -> {
      while (!stop.get()) {
        // the node's own janitor may run a pass meanwhile (it then does the deleting and this call waits for it)
        io.queen.RetentionRun run = queen.runRetentionNow();
        if (run.ran() && run.removed() == 0 && remaining(old) == 0) {
          break; // the backlog is gone
        }
      }
    }, "bench-retention");
    long t0 = System.nanoTime();
    janitor.start();
    Result with = measure("retention-push-with", THREADS, pusher, Window.timed(options.warmup(), options.window()));
    long during = backlog - remaining(old);
    double seconds = (System.nanoTime() - t0) / 1e9;
    stop.set(true);
    janitor.join();
    progress("push_batch100, janitor deleting", with);
    // the same pushes again, the backlog gone: the baseline is the mean of the windows before and after, so the
    // JIT's warming over the first window does not count for the janitor
    settle();
    Result after = measure("retention-push-after", THREADS, pusher, Window.timed(options.warmup(), options.window()));
    progress("push_batch100, no janitor work (after)", after);
    say(String.format(Locale.ROOT, "  janitor removed %,d messages during warm-up and window (%.0f/s)%s", during,
        during / seconds, during >= backlog ? "; the backlog ran out before the window ended" : ""));
    double baseline = (without.perSecond() + after.perSecond()) / 2;
    double ratio = with.perSecond() / baseline;
    rows.add(new Row("retention_push_impact", num(with.perSecond(), 0), num(baseline, 0), "msgs/s", num(ratio, 3),
        ">= 0.90", verdict(ratio >= 0.9), "baseline: the same pushes without the janitor deleting, before and after"));
    lines.add("RATIO retention_push_impact " + num(ratio, 3));
    lines.add(figure("retention_removed_per_s", during / seconds, "msgs/s"));
    deleteQueue(q);
    deleteQueue(old);
  }

  /** Messages still stored in queue {@code q}. */
  private long remaining(String q) {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("select coalesce(sum(p.next_offset - p.first_offset), 0) from"
            + " queen.partitions p join queen.queues q on q.id = p.queue_id where q.name = '" + q + "'")) {
      rs.next();
      return rs.getLong(1);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Queen: one message per push to a random partition of 1,000. Raw: one single-row INSERT per commit. */
  private void pushBatch1() throws Exception {
    Window window = Window.timed(options.warmup(), options.window());
    String q = queueName("push1");
    prime(queen.queue(q), partitionNames);
    Result queenR = measure("push1-queen", THREADS, i -> {
      QueueClient queue = queen.queue(q);
      SplittableRandom random = new SplittableRandom(2000 + i);
      return () -> {
        queue.partition(partitionNames[random.nextInt(PARTITIONS)]).push(Json.of(payloads.get(random.nextInt())));
        return 1;
      };
    }, window);
    double queenWal = lastWalPerMessage;
    progress("Queen", queenR);
    deleteQueue(q);

    settle();
    String sql = multiRowInsert(1);
    Result rawR = measure("push1-raw", THREADS, i -> {
      SplittableRandom random = new SplittableRandom(2000 + i);
      return new RawWorker(rawPool, sql) {
        @Override
        public int step() throws SQLException {
          ps.setString(1, partitionNames[random.nextInt(PARTITIONS)]);
          ps.setString(2, payloads.get(random.nextInt()));
          ps.executeUpdate();
          return 1;
        }
      };
    }, window);
    progress("raw single-row INSERT", rawR);
    double rawWal = lastWalPerMessage;
    truncateRaw();

    throughput("push_batch1", queenR, rawR, 0.80, "raw: one INSERT per commit");
    walFigures("push_batch1", queenWal, rawWal);
  }

  /** The WAL written per message by both sides of a push phase, as two {@code FIGURE} lines. */
  private void walFigures(String name, double queenWal, double rawWal) {
    say(String.format(Locale.ROOT, "  WAL per message: Queen %.0f bytes, raw %.0f bytes", queenWal, rawWal));
    lines.add(figure(name + "_wal_bytes_per_msg", queenWal, "bytes"));
    lines.add(figure(name + "_raw_wal_bytes_per_msg", rawWal, "bytes"));
  }

  /**
   * Queen: batches of {@value #BIG_BATCH} payloads over {@value #BIG_BATCH_PARTITIONS} random partitions (100 each) of
   * 1,000. Raw: the same rows through COPY (pgjdbc's CopyManager, text format), one COPY per commit.
   */
  private void pushBatch1000() throws Exception {
    Window window = Window.timed(options.warmup(), options.window());
    int per = BIG_BATCH / BIG_BATCH_PARTITIONS;
    String q = queueName("push1000");
    prime(queen.queue(q), partitionNames);
    Result queenR = measure("push1000-queen", THREADS, i -> {
      QueueClient queue = queen.queue(q);
      SplittableRandom random = new SplittableRandom(3000 + i);
      return () -> {
        int[] parts = pickDistinct(random, PARTITIONS, BIG_BATCH_PARTITIONS);
        List<PushItem> items = new ArrayList<>(BIG_BATCH);
        for (int k = 0; k < BIG_BATCH; k++) {
          items.add(PushItem.of(partitionNames[parts[k / per]], Json.of(payloads.get(random.nextInt()))));
        }
        queue.push(items);
        return BIG_BATCH;
      };
    }, window);
    double queenWal = lastWalPerMessage;
    progress("Queen", queenR);
    deleteQueue(q);

    settle();
    Result rawR = measure("push1000-raw", THREADS, i -> rawCopyWorker(3000 + i), window);
    progress("raw COPY of 1,000 rows", rawR);
    double rawWal = lastWalPerMessage;
    truncateRaw();

    throughput("push_batch1000", queenR, rawR, 0.60, "raw: one COPY of 1,000 rows per commit");
    walFigures("push_batch1000", queenWal, rawWal);
  }

  /**
   * A raw COPY worker for push_batch1000: one COPY of {@value #BIG_BATCH} rows (over {@value #BIG_BATCH_PARTITIONS}
   * random partitions) per commit, through pgjdbc's CopyManager in text format, on a pinned autocommit connection.
   */
  private Worker rawCopyWorker(long seed) throws SQLException {
    if (copyLines == null) {
      // COPY's text format: the payloads are ASCII JSON without backslashes, tabs or line breaks: they go as they are
      byte[][] lines = new byte[payloads.count()][];
      for (int k = 0; k < lines.length; k++) {
        String text = payloads.get(k);
        if (text.indexOf('\\') >= 0 || text.indexOf('\t') >= 0 || text.indexOf('\n') >= 0) {
          throw new IllegalStateException("payload " + k + " needs COPY escaping");
        }
        lines[k] = ("\t" + text + "\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII);
      }
      copyLines = lines;
    }
    byte[][] lineOf = copyLines;
    int per = BIG_BATCH / BIG_BATCH_PARTITIONS;
    String copySql = "COPY " + RAW_TABLE + " (partition, payload) FROM STDIN";
    SplittableRandom random = new SplittableRandom(seed);
    Connection c = rawPool.getConnection();
    c.setAutoCommit(true);
    org.postgresql.copy.CopyManager copy = c.unwrap(org.postgresql.PGConnection.class).getCopyAPI();
    java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream(BIG_BATCH * (Payloads.SIZE + 8));
    return new Worker() {
      @Override
      public int step() throws Exception {
        int[] parts = pickDistinct(random, PARTITIONS, BIG_BATCH_PARTITIONS);
        buf.reset();
        for (int k = 0; k < BIG_BATCH; k++) {
          buf.write(partitionNames[parts[k / per]].getBytes(java.nio.charset.StandardCharsets.US_ASCII));
          buf.write(lineOf[Math.floorMod(random.nextInt(), lineOf.length)]);
        }
        org.postgresql.copy.CopyIn in = copy.copyIn(copySql);
        byte[] bytes = buf.toByteArray();
        in.writeToCopy(bytes, 0, bytes.length);
        long n = in.endCopy();
        if (n != BIG_BATCH) {
          throw new IllegalStateException("COPY stored " + n + " rows of " + BIG_BATCH);
        }
        return BIG_BATCH;
      }

      @Override
      public void close() throws SQLException {
        c.close();
      }
    };
  }

  /**
   * {@value #HOT_THREADS} threads pushing batches of {@value #HOT_BATCH} into ONE partition, against the same threads each
   * push going to one random partition of 1,000. Every push locks its partition's row until it commits (offsets are
   * taken under it, so they are gapless and commit-ordered): on one partition the pushes serialise, commit flush
   * included. The raw figure beside them: the same threads, one 10-row INSERT per commit into the raw table.
   */
  private void pushHotPartition() throws Exception {
    Window window = Window.timed(options.warmup(), options.window());
    String hot = queueName("push-hot");
    String spread = queueName("push-spread");
    prime(queen.queue(hot), new String[] {"hot"});
    prime(queen.queue(spread), partitionNames);
    ThroughputRunner.WorkerFactory hotWorkers = i -> {
      QueueClient queue = queen.queue(hot);
      SplittableRandom random = new SplittableRandom(4000 + i);
      return () -> {
        List<PushItem> items = new ArrayList<>(HOT_BATCH);
        for (int k = 0; k < HOT_BATCH; k++) {
          items.add(PushItem.of("hot", Json.of(payloads.get(random.nextInt()))));
        }
        queue.push(items);
        return HOT_BATCH;
      };
    };
    ThroughputRunner.WorkerFactory spreadWorkers = i -> {
      QueueClient queue = queen.queue(spread);
      SplittableRandom random = new SplittableRandom(4000 + i);
      return () -> {
        String partition = partitionNames[random.nextInt(PARTITIONS)];
        List<PushItem> items = new ArrayList<>(HOT_BATCH);
        for (int k = 0; k < HOT_BATCH; k++) {
          items.add(PushItem.of(partition, Json.of(payloads.get(random.nextInt()))));
        }
        queue.push(items);
        return HOT_BATCH;
      };
    };
    Result spreadR = measure("push-spread", HOT_THREADS, spreadWorkers, window);
    double spreadWal = lastWalPerMessage;
    progress("Queen, 1,000 partitions", spreadR);
    settle();
    Result hotR = measure("push-hot", HOT_THREADS, hotWorkers, window);
    double hotWal = lastWalPerMessage;
    progress("Queen, one partition", hotR);
    deleteQueue(hot);
    deleteQueue(spread);

    settle();
    String sql = multiRowInsert(HOT_BATCH);
    Result rawR = measure("push-hot-raw", HOT_THREADS, i -> {
      SplittableRandom random = new SplittableRandom(4000 + i);
      return new RawWorker(rawPool, sql) {
        @Override
        public int step() throws SQLException {
          for (int k = 0; k < HOT_BATCH; k++) {
            ps.setString(2 * k + 1, "hot");
            ps.setString(2 * k + 2, payloads.get(random.nextInt()));
          }
          ps.executeUpdate();
          return HOT_BATCH;
        }
      };
    }, window);
    progress("raw 10-row INSERT", rawR);
    double rawWal = lastWalPerMessage;
    truncateRaw();

    double ratio = hotR.perSecond() / spreadR.perSecond();
    rows.add(new Row("push_hot_partition", num(hotR.perSecond(), 0), num(spreadR.perSecond(), 0), "msgs/s", num(ratio, 3),
        ">= 0.50", verdict(ratio >= 0.5), HOT_THREADS + " threads, pushes of " + HOT_BATCH + "; baseline: the same over 1,000"
        + " partitions; raw 10-row INSERT " + num(rawR.perSecond(), 0) + " msgs/s"));
    lines.add("RATIO push_hot_partition " + num(ratio, 3));
    lines.add(figure("push_hot_partition_msgs_per_s", hotR.perSecond(), "msgs/s"));
    lines.add(figure("push_spread_partitions_msgs_per_s", spreadR.perSecond(), "msgs/s"));
    lines.add(figure("push_hot_partition_raw_msgs_per_s", rawR.perSecond(), "msgs/s"));
    lines.add(figure("push_spread_vs_raw", spreadR.perSecond() / rawR.perSecond(), "ratio"));
    say(String.format(Locale.ROOT, "  WAL per message: one partition %.0f bytes, 1,000 partitions %.0f bytes, raw %.0f bytes",
        hotWal, spreadWal, rawWal));
    lines.add(figure("push_hot_partition_wal_bytes_per_msg", hotWal, "bytes"));
    lines.add(figure("push_spread_partitions_wal_bytes_per_msg", spreadWal, "bytes"));
    lines.add(figure("push_hot_partition_raw_wal_bytes_per_msg", rawWal, "bytes"));
  }

  /**
   * {@value #THREADS} producers (pushes of 100 over 10 of {@value #SUSTAINED_PARTITIONS} partitions) and {@value #THREADS}
   * consumers (pop batch(100).partitions(10), then ack) on one queue with {@code completedRetention} 5 s, for
   * {@code --sustained-minutes} (default 10). The node's janitor (every 30 s) removes what the group has consumed. Prints
   * per minute the rates of both sides, the backlog, the size of the message table and its dead tuples; the ratio is the
   * consumed rate of the last minute over the first's.
   */
  private void sustainedPushPop() throws Exception {
    int minutes = options.sustainedMinutes();
    String q = queueName("sustained");
    String[] names = Arrays.copyOf(partitionNames, SUSTAINED_PARTITIONS);
    queen.queue(q).configure(c -> c.retention(Duration.ofDays(1)).completedRetention(Duration.ofSeconds(5)));
    prime(queen.queue(q), names);
    AtomicLong pushed = new AtomicLong();
    AtomicLong acked = new AtomicLong();
    AtomicLong lost = new AtomicLong();
    AtomicLong empty = new AtomicLong();
    java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
    ExecutorService pool = Executors.newFixedThreadPool(2 * THREADS);
    List<Future<?>> futures = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      int index = t;
      futures.add(pool.submit(() -> {
        QueueClient queue = queen.queue(q);
        SplittableRandom random = new SplittableRandom(5000 + index);
        while (!stop.get()) {
          int[] parts = pickDistinct(random, SUSTAINED_PARTITIONS, PARTITIONS_PER_BATCH);
          List<PushItem> items = new ArrayList<>(BATCH);
          for (int k = 0; k < BATCH; k++) {
            items.add(PushItem.of(names[parts[k / (BATCH / PARTITIONS_PER_BATCH)]], Json.of(payloads.get(random.nextInt()))));
          }
          queue.push(items);
          pushed.addAndGet(BATCH);
        }
        return null;
      }));
      futures.add(pool.submit(() -> {
        Worker w = popThenAck(queen.queue(q).consumer().batch(BATCH).partitions(PARTITIONS_PER_BATCH), empty, lost);
        while (!stop.get()) {
          acked.addAndGet(w.step());
        }
        return null;
      }));
    }
    say("  minute  pushed/s  consumed/s   backlog  messages MB  live tuples  dead tuples");
    double[] pushRate = new double[minutes];
    double[] ackRate = new double[minutes];
    long t0 = System.nanoTime();
    long lastPushed = 0;
    long lastAcked = 0;
    long lastT = t0;
    try {
      for (int m = 0; m < minutes; m++) {
        long until = t0 + (m + 1) * 60_000_000_000L;
        while (System.nanoTime() < until) {
          for (Future<?> f : futures) {
            if (f.isDone()) {
              f.get(); // a worker failed: throw its failure
            }
          }
          Thread.sleep(Math.max(1, Math.min(1000, (until - System.nanoTime()) / 1_000_000)));
        }
        long now = System.nanoTime();
        long p = pushed.get();
        long a = acked.get();
        double secs = (now - lastT) / 1e9;
        pushRate[m] = (p - lastPushed) / secs;
        ackRate[m] = (a - lastAcked) / secs;
        lastPushed = p;
        lastAcked = a;
        lastT = now;
        long[] table = messageTable();
        say(String.format(Locale.ROOT, "  %6d %9.0f %11.0f %9d %12.1f %12d %12d", m + 1, pushRate[m], ackRate[m], p - a,
            table[0] / 1048576.0, table[2], table[1]));
      }
    } finally {
      stop.set(true);
      pool.shutdown();
      pool.awaitTermination(1, TimeUnit.MINUTES);
    }
    for (Future<?> f : futures) {
      f.get();
    }
    if (lost.get() > 0) {
      say("  note: " + lost.get() + " acks not successful");
    }
    deleteQueue(q);
    double ratio = ackRate[minutes - 1] / ackRate[0];
    double pushRatio = pushRate[minutes - 1] / pushRate[0];
    rows.add(new Row("sustained_push_pop", num(ackRate[minutes - 1], 0), num(ackRate[0], 0), "msgs/s", num(ratio, 3),
        ">= 0.90", verdict(ratio >= 0.9), minutes + " min, " + THREADS + " producers + " + THREADS + " consumers,"
        + " completedRetention 5 s; consumed/s in the last minute over the first; pushed/s ratio " + num(pushRatio, 3)));
    lines.add("RATIO sustained_push_pop " + num(ratio, 3));
    lines.add(figure("sustained_push_ratio", pushRatio, "ratio"));
    for (int m = 0; m < minutes; m++) {
      lines.add(figure("sustained_minute_" + (m + 1) + "_pushed_per_s", pushRate[m], "msgs/s"));
      lines.add(figure("sustained_minute_" + (m + 1) + "_consumed_per_s", ackRate[m], "msgs/s"));
    }
  }

  /** The size of {@code queen.messages} with its indexes (bytes), its dead and live tuples as the statistics count them. */
  private long[] messageTable() throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select pg_total_relation_size('queen.messages'), coalesce(s.n_dead_tup, 0),"
            + " coalesce(s.n_live_tup, 0) from (select 1) one left join pg_stat_user_tables s on s.schemaname = 'queen'"
            + " and s.relname = 'messages'")) {
      rs.next();
      return new long[] {rs.getLong(1), rs.getLong(2), rs.getLong(3)};
    }
  }

  // ------------------------------------------------------------------------------------------------------------- pop+ack

  /**
   * Drains a backlog spread evenly over 1,000 partitions. Queen: pop(batch 100) then ack(batch) with the queue's own group.
   * Raw: {@code DELETE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 100) RETURNING}. Both backlogs are filled
   * first; then the sides run in alternating rounds (see {@link #alternate}), so neither the cold start nor the ragged end
   * (threads running out of work) is counted.
   */
  private void popAckBatch100() throws Exception {
    // The backlog is filled in rounds of 4,000 messages: 4 per partition.
    long rounds = Math.max(1, Math.round(200_000 * options.scale() / 4_000));
    // + one message per partition from priming (Queen) and the same 1,000 rows on the raw side
    long backlog = rounds * 4_000 + PARTITIONS;
    long depth = backlog / PARTITIONS;
    // one untimed round and the measured ones, each of which may overshoot by the batches in flight when it stops, and a
    // round's worth left over: the last pops of a nearly drained queue come back short
    long roundMessages = backlog / (POPACK_ROUNDS + 2) - (long) THREADS * BATCH;
    // partitions(n): a pop may lease up to n partitions and takes at most 100 messages over all of them. The default picks
    // the fewest partitions that can still fill a batch of 100 from this backlog: ceil(100 / messages per partition), so
    // 1 at the default scale (201 per partition) and 4 at --scale 0.1 (21 per partition). Asking for more than that
    // makes each pop lock more candidate cursor rows than a full batch needs; asking for fewer makes batches short. A real
    // consumer would tune it the same way; --popack-partitions overrides it to see the cost of spreading (e.g. 10 x 10).
    int n = options.popackPartitions() > 0 ? options.popackPartitions() : (int) Math.min(1000, (BATCH + depth - 1) / depth);
    say("  backlog " + backlog + " messages on each side, " + depth + " per partition; Queen pops use batch(" + BATCH
        + ").partitions(" + n + "); rounds of " + roundMessages + " messages");

    String q = queueName("popack");
    prime(queen.queue(q), partitionNames);
    Result fill = fillQueen(q, rounds);
    progress("  (fill, Queen push of 1,000-message batches)", fill);
    Result rawFill = fillRaw(rounds);
    try (Connection c = rawPool.getConnection(); PreparedStatement ps = c.prepareStatement("INSERT INTO " + RAW_TABLE
        + " (partition, payload) SELECT p, j::jsonb FROM unnest(?::text[], ?::text[]) AS u(p, j)")) {
      String[] texts = new String[PARTITIONS];
      for (int i = 0; i < PARTITIONS; i++) {
        texts[i] = payloads.get(i);
      }
      ps.setArray(1, c.createArrayOf("text", partitionNames));
      ps.setArray(2, c.createArrayOf("text", texts));
      ps.executeUpdate();
    }
    progress("  (fill, raw unnest INSERT of 1,000 rows)", rawFill);

    AtomicLong lost = new AtomicLong();
    AtomicLong emptyPops = new AtomicLong();
    ThroughputRunner.WorkerFactory queenWorkers =
        i -> popThenAck(queen.queue(q).consumer().batch(BATCH).partitions(n), emptyPops, lost);
    String sql = "DELETE FROM " + RAW_TABLE + " WHERE id IN (SELECT id FROM " + RAW_TABLE
        + " ORDER BY id LIMIT " + BATCH + " FOR UPDATE SKIP LOCKED) RETURNING id, partition, payload, created_at";
    ThroughputRunner.WorkerFactory rawWorkers = i -> new RawWorker(rawPool, sql) {
      @Override
      public int step() throws SQLException {
        int count = 0;
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            rs.getLong(1);
            rs.getString(2);
            rs.getString(3);
            rs.getTimestamp(4);
            count++;
          }
        }
        return count == 0 ? -1 : count;
      }
    };
    settle();
    Result[] r = alternate("popack-queen", 'Q', queenWorkers, "popack-raw", 'R', rawWorkers, roundMessages, 1, POPACK_ROUNDS);
    Result queenR = r[0];
    Result rawR = r[1];
    progress("Queen pop+ack", queenR);
    progress("raw SKIP LOCKED delete", rawR);
    if (lost.get() > 0 || emptyPops.get() > 0) {
      say("  note: " + lost.get() + " acks not successful, " + emptyPops.get() + " empty pops");
    }
    deleteQueue(q);
    truncateRaw();

    throughput("popack_batch100", queenR, rawR, 0.50, "backlog " + backlog + ", partitions(" + n + "), " + POPACK_ROUNDS
        + " alternating rounds of " + roundMessages);
  }

  /** Pushes {@code rounds} x 4,000 messages: each round puts 4 messages in each of the 1,000 partitions. */
  private Result fillQueen(String q, long rounds) throws Exception {
    AtomicLong next = new AtomicLong();
    long chunks = rounds * 4;
    return measure("fill-queen", THREADS, i -> {
      QueueClient queue = queen.queue(q);
      return () -> {
        long c = next.getAndIncrement();
        if (c >= chunks) {
          return -1;
        }
        // chunk c: the 250 partitions p with p % 4 == c % 4, 4 messages each; concurrent chunks touch disjoint partitions
        List<PushItem> items = new ArrayList<>(1000);
        for (int k = 0; k < 1000; k++) {
          int p = (k / 4) * 4 + (int) (c % 4);
          items.add(PushItem.of(partitionNames[p], Json.of(payloads.get((int) (c * 1000 + k)))));
        }
        queue.push(items);
        return 1000;
      };
    }, Window.between(0, chunks * 1000, Duration.ofMinutes(5), Duration.ofMinutes(1)));
  }

  /**
   * Brings a fresh queue to a steady state before it is measured: one message in each of its partitions (so they exist), then
   * {@link #settle()}, whose ANALYZE also makes every pooled session re-plan Queen's statements with statistics that know
   * the partitions. Without it, a brand-new database runs on plans made while its tables were empty until autovacuum
   * analyses them (see the report: push of 100 ran ~4x slower that way).
   */
  private void prime(QueueClient queue, String[] names) throws Exception {
    for (int from = 0; from < names.length; from += 1000) {
      List<PushItem> items = new ArrayList<>(1000);
      for (int p = from; p < Math.min(names.length, from + 1000); p++) {
        items.add(PushItem.of(names[p], Json.of(payloads.get(p))));
      }
      queue.push(items);
    }
    settle();
  }

  private Result fillRaw(long rounds) throws Exception {
    AtomicLong next = new AtomicLong();
    long chunks = rounds * 4;
    String sql = "INSERT INTO " + RAW_TABLE + " (partition, payload) SELECT p, j::jsonb FROM unnest(?::text[], ?::text[]) AS u(p, j)";
    return measure("fill-raw", THREADS, i -> new RawWorker(rawPool, sql) {
      @Override
      public int step() throws SQLException {
        long c = next.getAndIncrement();
        if (c >= chunks) {
          return -1;
        }
        String[] parts = new String[1000];
        String[] texts = new String[1000];
        for (int k = 0; k < 1000; k++) {
          parts[k] = partitionNames[(k / 4) * 4 + (int) (c % 4)];
          texts[k] = payloads.get((int) (c * 1000 + k));
        }
        Array a = ps.getConnection().createArrayOf("text", parts);
        Array b = ps.getConnection().createArrayOf("text", texts);
        ps.setArray(1, a);
        ps.setArray(2, b);
        ps.executeUpdate();
        a.free();
        b.free();
        return 1000;
      }
    }, Window.between(0, chunks * 1000, Duration.ofMinutes(5), Duration.ofMinutes(1)));
  }

  // ------------------------------------------------------------------------------------------------------------- latency

  /**
   * Push-to-handler latency at a steady rate. {@code fresh = false}: over 100 partitions, two workers with
   * {@code --latency-batch} and {@code --latency-partitions}. {@code fresh = true} (latency_fresh): every message into a
   * partition of its own, created by its push, as a source streaming single-row commits of new keys makes them, into
   * the README's plain {@code consume(...)} with {@code concurrency(4)} and the default batch and partitions. Pushes
   * go out on a fixed schedule (so the rate does not depend on how fast they return); each payload carries
   * {@link System#nanoTime()} taken just before its push call, so the latency includes the push's own commit. The
   * first {@code warmup} seconds of messages are not counted.
   */
  private void latency(boolean fresh) throws Exception {
    int rate = options.latencyRate();
    long warmupCount = Math.round(rate * options.warmup().toMillis() / 1000.0);
    long measuredCount = Math.round(rate * options.latencyWindow().toMillis() / 1000.0);
    int total = (int) (warmupCount + measuredCount);
    long intervalNanos = 1_000_000_000L / rate;
    String q = queueName(fresh ? "latency-fresh" : "latency");
    String figure = fresh ? "latency_fresh" : "latency";

    double commitMs = rawCommitMillis();
    // the prime messages carry no "seq"; the handler skips them
    prime(queen.queue(q), Arrays.copyOf(partitionNames, 100));
    AtomicLongArray latencies = new AtomicLongArray(total);
    AtomicLong received = new AtomicLong();
    AtomicLong duplicates = new AtomicLong();
    // batch(10).partitions(10) by default: a worker's pop may gather the few messages waiting in up to 10 partitions. With
    // batch 1 (or one partition per pop, which holds ~1 message at this rate) every message pays a pop commit and an ack
    // commit of its own, and 2 workers cannot keep up with 500 msgs/s where a commit costs milliseconds (measured: p50 of
    // seconds with batch 1, hundreds of ms with partitions 1). See --latency-batch and --latency-partitions.
    WaitSampler sampler = WaitSampler.start(options.diagnose(), "latency", options.diagnose() ? db.connection() : null);
    io.queen.ConsumerBuilder consumer = fresh
        ? queen.queue(q).group("lat").subscription(SubscriptionMode.ALL).concurrency(4)
        : queen.queue(q).group("lat").subscription(SubscriptionMode.ALL).concurrency(2)
            .batch(options.latencyBatch()).partitions(options.latencyPartitions());
    Subscription sub = consumer.consume(msg -> {
          long now = System.nanoTime();
          if (!msg.payload().has("seq")) {
            return;
          }
          long seq = msg.payload().get("seq").asLong();
          long t = msg.payload().get("t").asLong();
          if (seq >= 0 && seq < total && latencies.compareAndSet((int) seq, 0, Math.max(1, now - t))) {
            received.incrementAndGet();
          } else {
            duplicates.incrementAndGet();
          }
        });
    long[] pushNanos = new long[total];
    ExecutorService pushers = Executors.newFixedThreadPool(2, ThroughputRunner.named("bench-latency-push"));
    List<Future<?>> futures = new ArrayList<>();
    try {
      long start = System.nanoTime() + 500_000_000L; // after the subscription has taken the prime messages
      for (int t = 0; t < 2; t++) {
        int first = t;
        futures.add(pushers.submit(() -> {
          QueueClient queue = queen.queue(q);
          SplittableRandom random = new SplittableRandom(3000 + first);
          for (int seq = first; seq < total; seq += 2) {
            long due = start + seq * intervalNanos;
            long wait;
            while ((wait = due - System.nanoTime()) > 0) {
              LockSupport.parkNanos(wait);
            }
            long t0 = System.nanoTime();
            String partition = fresh ? "f-" + seq : partitionNames[random.nextInt(100)];
            queue.partition(partition).push(Json.of(Payloads.stamped(seq, t0)));
            pushNanos[seq] = System.nanoTime() - t0;
          }
          return null;
        }));
      }
      for (Future<?> f : futures) {
        f.get(options.latencyWindow().toSeconds() + options.warmup().toSeconds() + 120, TimeUnit.SECONDS);
      }
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (received.get() < total && System.nanoTime() < deadline) {
        LockSupport.parkNanos(5_000_000);
      }
      say("  pushed " + total + " at " + rate + "/s, handled " + received.get() + ", duplicates " + duplicates.get()
          + ", handler failures " + sub.failed());
    } finally {
      ThroughputRunner.shutdown(pushers, "latency-push");
      sub.close(Duration.ofSeconds(5));
      if (sampler != null) {
        sampler.close();
      }
    }
    long[] measured = new long[(int) measuredCount];
    int m = 0;
    long missing = 0;
    for (int seq = (int) warmupCount; seq < total; seq++) {
      long v = latencies.get(seq);
      if (v == 0) {
        missing++;
      } else {
        measured[m++] = v;
      }
    }
    measured = Arrays.copyOf(measured, m);
    Arrays.sort(measured);
    long[] pushes = Arrays.copyOfRange(pushNanos, (int) warmupCount, total);
    Arrays.sort(pushes);
    double p50 = percentile(measured, 0.50) / 1e6;
    double p99 = percentile(measured, 0.99) / 1e6;
    say(String.format(Locale.ROOT, "  push->handler over %d messages: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms; "
        + "push call p50 %.3f ms, p99 %.3f ms", m, p50, percentile(measured, 0.90) / 1e6, p99,
        (m == 0 ? 0 : measured[m - 1]) / 1e6, percentile(pushes, 0.50) / 1e6, percentile(pushes, 0.99) / 1e6));
    deleteQueue(q);
    if (missing > 0) {
      throw new IllegalStateException(missing + " of " + measuredCount + " measured messages never reached the handler");
    }
    double max = (m == 0 ? 0 : measured[m - 1]) / 1e6;
    String note = fresh
        ? rate + " msgs/s for " + options.latencyWindow().toSeconds() + " s, one new partition per message,"
            + " consume(...) with concurrency(4)"
        : rate + " msgs/s for " + options.latencyWindow().toSeconds() + " s, concurrency(2).batch("
            + options.latencyBatch() + ").partitions(" + options.latencyPartitions() + "), 100 partitions";
    double p99Target = fresh ? 25 : 50;
    rows.add(new Row(figure + "_p50_ms", num(p50, 3), num(commitMs, 3), "ms", "", "<= 5", verdict(p50 <= 5),
        note + "; baseline: raw 1-row commit p50"));
    rows.add(new Row(figure + "_p99_ms", num(p99, 3), "", "ms", "", "<= " + (int) p99Target, verdict(p99 <= p99Target),
        note));
    lines.add(figure(figure + "_p50_ms", p50, "ms"));
    lines.add(figure(figure + "_p99_ms", p99, "ms"));
    if (fresh) {
      rows.add(new Row(figure + "_max_ms", num(max, 3), "", "ms", "", "<= 250", verdict(max <= 250), note));
      lines.add(figure(figure + "_max_ms", max, "ms"));
    }
    lines.add(figure("raw_commit_p50_ms", commitMs, "ms"));
  }

  /**
   * The floor under any push-to-handler latency on this machine: the median time of one autocommit single-row INSERT from one
   * connection (one WAL flush), over 300 commits after 50 of warm-up.
   */
  private double rawCommitMillis() throws SQLException {
    long[] t = new long[300];
    try (Connection c = rawPool.getConnection(); PreparedStatement ps = c.prepareStatement(multiRowInsert(1))) {
      c.setAutoCommit(true);
      for (int i = -50; i < t.length; i++) {
        ps.setString(1, partitionNames[0]);
        ps.setString(2, payloads.get(i));
        long t0 = System.nanoTime();
        ps.executeUpdate();
        if (i >= 0) {
          t[i] = System.nanoTime() - t0;
        }
      }
    }
    truncateRaw();
    Arrays.sort(t);
    double ms = percentile(t, 0.5) / 1e6;
    say(String.format(Locale.ROOT, "  raw single-row commit from one connection: p50 %.3f ms, p99 %.3f ms", ms,
        percentile(t, 0.99) / 1e6));
    return ms;
  }

  // ------------------------------------------------------------------------------------------------------ pop vs partitions

  /**
   * Pop latency with many caught-up partitions versus few. For each case a fresh queue gets one message in each of N
   * partitions, and the queue's group drains and acks them all, so every partition exists and has a cursor at its end. Then,
   * many times over and alternating between the two queues (so that a slow spell of the disk hits both alike): 10 fresh
   * messages are pushed to 5 random partitions (2 each) and popped with batch(10).partitions(5), each pop followed by its
   * ack. Only the pops (and, separately, pop+ack) are timed. The 10-partition queue is the baseline.
   */
  private void popScale() throws Exception {
    int big = (int) Math.max(1_000, Math.round(100_000 * options.scale()));
    ScaleCase bigCase = prepareScaleCase(big);
    ScaleCase smallCase = prepareScaleCase(10);
    settle();
    int warmup = 50;
    int iterations = 400;
    for (int it = 0; it < warmup + iterations; it++) {
      boolean counted = it >= warmup;
      if (it % 2 == 0) {
        bigCase.round(counted);
        smallCase.round(counted);
      } else {
        smallCase.round(counted);
        bigCase.round(counted);
      }
    }
    double[] bigMs = bigCase.summary();
    double[] smallMs = smallCase.summary();
    deleteQueue(bigCase.queue.name());
    deleteQueue(smallCase.queue.name());
    double ratio = bigMs[0] / smallMs[0];
    say(String.format(Locale.ROOT, "  pop+ack median: %.3f ms with %d partitions, %.3f ms with 10 (ratio %.3f)", bigMs[1], big,
        smallMs[1], bigMs[1] / smallMs[1]));
    rows.add(new Row("pop_100k_vs_10", num(bigMs[0], 3), num(smallMs[0], 3), "ms", num(ratio, 3), "<= 2", verdict(ratio <= 2),
        "median pop(batch 10): " + big + " vs 10 partitions; pop+ack " + num(bigMs[1], 3) + " vs " + num(smallMs[1], 3) + " ms"));
    lines.add("RATIO pop_100k_vs_10 " + num(ratio, 3));
    lines.add(figure("pop_latency_" + big + "_partitions_ms", bigMs[0], "ms"));
    lines.add(figure("pop_latency_10_partitions_ms", smallMs[0], "ms"));
    lines.add(figure("popack_latency_" + big + "_partitions_ms", bigMs[1], "ms"));
    lines.add(figure("popack_latency_10_partitions_ms", smallMs[1], "ms"));
  }

  /** Makes a queue with {@code partitions} partitions, each holding one message that the queue's group has consumed. */
  private ScaleCase prepareScaleCase(int partitions) throws Exception {
    ScaleCase sc = new ScaleCase(queen.queue(queueName("scale" + partitions)), partitions);
    int chunks = (partitions + 999) / 1000;
    // Filled in stages of 1 / 10 / 100 / ... chunks of 1,000 partitions, with an ANALYZE between stages, as autovacuum would
    // do while a table grows tenfold; without it the fill's cost depends on plans made when the table was small.
    long t0 = System.nanoTime();
    for (int stageEnd = 1, stageStart = 0; stageStart < chunks; stageStart = stageEnd, stageEnd = Math.min(chunks, stageEnd * 10)) {
      fillStage(sc, stageStart, stageEnd);
      settle();
    }
    say(String.format(Locale.ROOT, "    (%d partitions created, one message each, in %.1f s)", partitions,
        (System.nanoTime() - t0) / 1e9));

    // One pop subscribes the group (creating its cursor rows), then statistics are refreshed before the drain, as
    // autovacuum would do on a live system; the pop's messages are acked with the rest.
    List<Message> first = sc.queue.consumer().batch(1).partitions(1).pop();
    queen.ack(first);
    settle();
    // Pops of 100 partitions drain fastest (acks over 1,000 partitions cost more per message); not measured.
    int drainPartitions = Math.min(100, partitions);
    Result drain = measure("scale-drain", Math.min(THREADS, chunks), i -> {
      ConsumerBuilder consumer = sc.queue.consumer().batch(drainPartitions).partitions(drainPartitions);
      return () -> {
        List<Message> batch = consumer.pop();
        if (batch.isEmpty()) {
          LockSupport.parkNanos(5_000_000);
          return 0;
        }
        int ok = 0;
        for (AckResult r : queen.ack(batch)) {
          ok += r.success() ? 1 : 0;
        }
        return ok;
      };
    }, Window.between(0, partitions - first.size(), Duration.ofMinutes(3), Duration.ofMinutes(1)));
    if (drain.total() < partitions - first.size()) {
      throw new IllegalStateException("drained only " + drain.total() + " of " + partitions + " messages in 3 minutes");
    }
    progress("  (drained: pop(batch " + drainPartitions + ").partitions(" + drainPartitions + ") + ack)", drain);
    return sc;
  }

  /** Pushes chunks [from, to) of 1,000 new partitions (one message each) with up to 4 threads. */
  private void fillStage(ScaleCase sc, int from, int to) throws Exception {
    AtomicLong nextChunk = new AtomicLong(from);
    long stageMessages = Math.min(sc.partitions, (long) to * 1000) - (long) from * 1000;
    measure("scale-fill", Math.min(THREADS, to - from), i -> () -> {
      long c = nextChunk.getAndIncrement();
      if (c >= to) {
        return -1;
      }
      List<PushItem> items = new ArrayList<>(1000);
      for (int p = (int) c * 1000; p < Math.min(sc.partitions, (c + 1) * 1000); p++) {
        items.add(PushItem.of(sc.names[p], Json.of(payloads.get(p))));
      }
      sc.queue.push(items);
      return items.size();
    }, Window.between(0, stageMessages, Duration.ofMinutes(5), Duration.ofMinutes(1)));
  }

  /** One queue of the pop-latency comparison and its samples. Used from one thread. */
  private final class ScaleCase {
    final QueueClient queue;
    final int partitions;
    final String[] names;
    final ConsumerBuilder consumer;
    final SplittableRandom random;
    final long[] pops = new long[4000];
    final long[] popAcks = new long[4000];
    int n;
    long empty;
    long messages;

    ScaleCase(QueueClient queue, int partitions) {
      this.queue = queue;
      this.partitions = partitions;
      this.names = new String[partitions];
      for (int i = 0; i < partitions; i++) {
        names[i] = "k" + i;
      }
      this.consumer = queue.consumer().batch(10).partitions(5);
      this.random = new SplittableRandom(4000 + partitions);
    }

    /** Pushes 10 messages to 5 random partitions, then pops and acks until it has them all. */
    void round(boolean counted) {
      int[] parts = pickDistinct(random, partitions, 5);
      List<PushItem> items = new ArrayList<>(10);
      for (int k = 0; k < 10; k++) {
        items.add(PushItem.of(names[parts[k / 2]], Json.of(payloads.get(random.nextInt()))));
      }
      queue.push(items);
      int got = 0;
      int tries = 0;
      while (got < 10) {
        if (++tries > 200) {
          throw new IllegalStateException("could not pop the 10 messages just pushed (got " + got + ") with " + partitions
              + " partitions");
        }
        long t0 = System.nanoTime();
        List<Message> batch = consumer.pop();
        long t1 = System.nanoTime();
        if (batch.isEmpty()) {
          empty++;
          LockSupport.parkNanos(1_000_000);
          continue;
        }
        for (AckResult r : queen.ack(batch)) {
          if (!r.success()) {
            throw new IllegalStateException("ack failed: " + r);
          }
        }
        long t2 = System.nanoTime();
        got += batch.size();
        if (counted && n < pops.length) {
          pops[n] = t1 - t0;
          popAcks[n] = t2 - t0;
          n++;
          messages += batch.size();
        }
      }
    }

    /** {median pop ms, median pop+ack ms}, after printing a summary line. */
    double[] summary() {
      long[] p = Arrays.copyOf(pops, n);
      long[] pa = Arrays.copyOf(popAcks, n);
      Arrays.sort(p);
      Arrays.sort(pa);
      double pop = percentile(p, 0.5) / 1e6;
      double popAck = percentile(pa, 0.5) / 1e6;
      say(String.format(Locale.ROOT, "  %d partitions: %d pops, %.1f messages per pop, %d empty; pop p50 %.3f ms p90 %.3f ms;"
          + " pop+ack p50 %.3f ms", partitions, n, n == 0 ? 0.0 : (double) messages / n, empty, pop, percentile(p, 0.9) / 1e6,
          popAck));
      return new double[] {pop, popAck};
    }
  }

  // ------------------------------------------------------------------------------------------------------ transactions, KV

  /**
   * What an idempotency marker costs a consumer. Two queues get the same backlog ({@value #ONCE_PARTITIONS} partitions,
   * {@value #ONCE_DEPTH} messages each, pushed in the same order), drained by {@value #THREADS} threads popping
   * {@code batch(10).partitions(1)}. Plain: {@code queen.ack(batch)}. Once: one bundle per popped batch,
   * {@code once(ns, "m:" + id, Kv.ttl(1 h).required())} for every message (distinct keys) then {@code ack(batch)}, committed
   * together. x = 1 - once/plain.
   *
   * <p>The two sides run in alternating rounds of {@value #ONCE_ROUND} messages (see {@link #alternate}):
   * {@value #ONCE_WARMUP_ROUNDS} untimed rounds per side, then {@value #ONCE_ROUNDS} measured ones.
   */
  private void onceAckOverhead() throws Exception {
    String[] names = Arrays.copyOf(partitionNames, ONCE_PARTITIONS);
    long backlog = (long) ONCE_PARTITIONS * ONCE_DEPTH;
    String plainQ = queueName("ack-plain");
    String onceQ = queueName("ack-once");
    String ns = "bench-once-" + runId;
    KvOptions marker = Kv.ttl(Duration.ofHours(1)).required();

    long t0 = System.nanoTime();
    // rounds of 10 messages per partition, the same items to both queues
    for (int round = 0; round < ONCE_DEPTH / 10; round++) {
      List<PushItem> items = new ArrayList<>(ONCE_PARTITIONS * 10);
      for (int k = 0; k < ONCE_PARTITIONS * 10; k++) {
        items.add(PushItem.of(names[k / 10], Json.of(payloads.get(round * ONCE_PARTITIONS * 10 + k))));
      }
      queen.queue(plainQ).push(items);
      queen.queue(onceQ).push(items);
    }
    say(String.format(Locale.ROOT, "  backlog %d messages in each queue (%d partitions x %d), filled in %.1f s; pops use"
        + " batch(%d).partitions(1); rounds of %d messages", backlog, ONCE_PARTITIONS, ONCE_DEPTH,
        (System.nanoTime() - t0) / 1e9, ONCE_BATCH, ONCE_ROUND));

    AtomicLong plainLost = new AtomicLong();
    AtomicLong plainEmpty = new AtomicLong();
    AtomicLong onceLost = new AtomicLong();
    AtomicLong onceEmpty = new AtomicLong();
    ThroughputRunner.WorkerFactory plainWorkers =
        i -> popThenAck(queen.queue(plainQ).consumer().batch(ONCE_BATCH).partitions(1), plainEmpty, plainLost);
    ThroughputRunner.WorkerFactory onceWorkers =
        i -> popThen(queen.queue(onceQ).consumer().batch(ONCE_BATCH).partitions(1), onceEmpty, onceLost, batch -> {
          // one bundle: once() per message, then the batch's ack
          Transaction tx = queen.transaction();
          for (Message m : batch) {
            tx.once(ns, "m:" + m.id(), marker);
          }
          CommitResult res = tx.ack(batch).commit();
          return res.success() ? res.acks() : List.of();
        });
    settle();
    Result[] r = alternate("ack-plain", 'P', plainWorkers, "ack-once", 'O', onceWorkers, ONCE_ROUND, ONCE_WARMUP_ROUNDS,
        ONCE_ROUNDS);
    Result plain = r[0];
    Result once = r[1];
    progress("pop + ack(batch)", plain);
    progress("pop + bundle(once x n, ack(batch))", once);
    if (plainLost.get() + plainEmpty.get() + onceLost.get() + onceEmpty.get() > 0) {
      say("  note: plain " + plainLost.get() + " acks not successful, " + plainEmpty.get() + " empty pops; once "
          + onceLost.get() + " messages not committed, " + onceEmpty.get() + " empty pops");
    }
    deleteQueue(plainQ);
    deleteQueue(onceQ);

    double x = 1 - once.perSecond() / plain.perSecond();
    rows.add(new Row("once_ack_overhead", num(once.perSecond(), 0), num(plain.perSecond(), 0), "msgs/s", num(x, 3), "<= 0.20",
        verdict(x <= 0.20), "x = 1 - once/plain; " + ONCE_ROUNDS + " alternating rounds of " + ONCE_ROUND + " per side over "
        + ONCE_PARTITIONS + " partitions, batch(" + ONCE_BATCH + "); baseline: pop + ack(batch)"));
    lines.add("RATIO once_ack_overhead " + num(x, 3));
    lines.add(figure("once_ack_msgs_per_s", once.perSecond(), "msgs/s"));
    lines.add(figure("plain_ack_msgs_per_s", plain.perSecond(), "msgs/s"));
  }

  /** {@value #THREADS} threads, each {@code kv().put} of a 200-byte JSON value under a key never written before, ttl 1 h. */
  private void kvPut() throws Exception {
    String ns = "bench-put-" + runId;
    KvOptions ttl = Kv.ttl(Duration.ofHours(1));
    settle();
    Result r = measure("kv-put", THREADS, i -> {
      Kv kv = queen.kv();
      long[] n = {0};
      return () -> {
        long k = n[0]++;
        kv.put(ns, "t" + i + ":" + k, Json.of(payloads.get((int) k)), ttl);
        return 1;
      };
    }, Window.timed(options.warmup(), options.window()));
    say(String.format(Locale.ROOT, "  %-40s %,12.0f ops/s  (%,d puts in %.2f s; %,d in all)", "kv().put, distinct keys",
        r.perSecond(), r.messages(), r.seconds(), r.total()));
    opsFigure("kv_put_per_s", r, THREADS + " threads, distinct new keys, 200-byte JSON values, ttl 1 h");
  }

  /** {@value #THREADS} threads, each {@code kv().incr(ns, key, 1, ttl 1 h)} on the same single key. */
  private void kvIncrHotKey() throws Exception {
    String ns = "bench-incr-" + runId;
    KvOptions ttl = Kv.ttl(Duration.ofHours(1));
    settle();
    Result r = measure("kv-incr", THREADS, i -> {
      Kv kv = queen.kv();
      return () -> {
        kv.incr(ns, "hot", 1, ttl);
        return 1;
      };
    }, Window.timed(options.warmup(), options.window()));
    long value = queen.kv().get(ns, "hot").value().asLong();
    say(String.format(Locale.ROOT, "  %-40s %,12.0f ops/s  (%,d incrs in %.2f s; %,d in all; counter %,d)",
        "kv().incr, one key", r.perSecond(), r.messages(), r.seconds(), r.total(), value));
    if (value != r.total()) {
      throw new IllegalStateException("counter is " + value + " after " + r.total() + " increments");
    }
    opsFigure("kv_incr_hot_key_per_s", r, THREADS + " threads, incr(1) on one key, ttl 1 h");
  }

  /** A figure in operations per second, with no baseline: a table row and a {@code FIGURE} line. */
  private void opsFigure(String name, Result r, String note) {
    rows.add(new Row(name, num(r.perSecond(), 0), "", "ops/s", "", "", "", note));
    lines.add(figure(name, r.perSecond(), "ops/s"));
  }

  // ------------------------------------------------------------------------------------------------------------- helpers

  Options options() {
    return options;
  }

  Payloads payloads() {
    return payloads;
  }

  TestDatabase db() {
    return db;
  }

  double scale() {
    return options.scale();
  }

  Queen queen() {
    return queen;
  }

  void row(String name, String queenValue, String baseline, String unit, String ratio, String target, String verdict,
      String note) {
    rows.add(new Row(name, queenValue, baseline, unit, ratio, target, verdict, note));
  }

  void line(String line) {
    lines.add(line);
  }

  void deleteQueue(Queen owner, String q) {
    long t0 = System.nanoTime();
    try {
      owner.queue(q).delete();
      say(String.format(Locale.ROOT, "  (deleted queue %s in %.1f s)", q, (System.nanoTime() - t0) / 1e9));
    } catch (RuntimeException e) {
      say("  WARN: could not delete queue " + q + ": " + e);
    }
  }

  /** A worker that pops a batch and acknowledges it; counts empty pops and acks that did not succeed. */
  private ThroughputRunner.Worker popThenAck(ConsumerBuilder consumer, AtomicLong emptyPops, AtomicLong lost) {
    return popThen(consumer, emptyPops, lost, queen::ack);
  }

  /**
   * A worker that pops a batch and settles it with {@code settle}, which returns the acks' results (an empty list when
   * nothing applied); counts empty pops and messages not settled.
   */
  private static ThroughputRunner.Worker popThen(ConsumerBuilder consumer, AtomicLong emptyPops, AtomicLong lost,
      Function<List<Message>, List<AckResult>> settle) {
    return () -> {
      List<Message> batch = consumer.pop();
      if (batch.isEmpty()) {
        emptyPops.incrementAndGet();
        LockSupport.parkNanos(1_000_000);
        return 0;
      }
      int ok = 0;
      for (AckResult r : settle.apply(batch)) {
        if (r.success()) {
          ok++;
        }
      }
      lost.addAndGet(batch.size() - ok);
      return ok;
    };
  }

  /** {@link ThroughputRunner#run}, with wait-event sampling when {@code --diagnose} is given. */
  private Result measure(String name, int threads, ThroughputRunner.WorkerFactory factory, Window window) throws Exception {
    WaitSampler sampler = WaitSampler.start(options.diagnose(), name, options.diagnose() ? db.connection() : null);
    long before = walPosition();
    try {
      Result r = ThroughputRunner.run(name, threads, factory, window);
      lastWalPerMessage = r.total() > 0 ? (double) (walPosition() - before) / r.total() : 0;
      if (options.diagnose() && r.total() > 0) {
        say(String.format(Locale.ROOT, "  %s: %.0f WAL bytes per message (%d messages in all)", name, lastWalPerMessage,
            r.total()));
      }
      return r;
    } finally {
      if (sampler != null) {
        sampler.close();
      }
    }
  }

  /**
   * Two sides that drain backlogs of their own, run in alternating rounds of {@code roundMessages} in ABBA order (a, b, b,
   * a, ...) after {@code warmupRounds} untimed rounds each; returns each side's messages and time summed over its
   * {@code rounds} measured rounds. One long window per side measures whatever the machine was doing during it (on 2 cores, the just-in-time
   * compiler takes 30-60 % of a core for the first seconds of a code path, and this disk's speed drifts by minutes);
   * neighbouring rounds in ABBA order put both sides under the same conditions. Each backlog must hold
   * {@code (warmupRounds + rounds) * roundMessages} plus the batches in flight when a round stops.
   */
  private Result[] alternate(String nameA, char tagA, ThroughputRunner.WorkerFactory a, String nameB, char tagB,
      ThroughputRunner.WorkerFactory b, long roundMessages, int warmupRounds, int rounds) throws Exception {
    Window round = Window.between(roundMessages / 20, roundMessages, Duration.ofMinutes(1), Duration.ofMinutes(1));
    for (int r = 0; r < warmupRounds; r++) {
      measure(nameA, THREADS, a, round);
      measure(nameB, THREADS, b, round);
    }
    Result sumA = new Result(0, 0, 0);
    Result sumB = new Result(0, 0, 0);
    StringBuilder perRound = new StringBuilder();
    for (int r = 0; r < rounds; r++) {
      for (int side = 0; side < 2; side++) {
        boolean isA = (side == 0) == (r % 2 == 0);
        Result x = measure(isA ? nameA : nameB, THREADS, isA ? a : b, round);
        perRound.append(String.format(Locale.ROOT, " %s %,.0f", isA ? tagA : tagB, x.perSecond()));
        if (isA) {
          sumA = sumA.plus(x);
        } else {
          sumB = sumB.plus(x);
        }
      }
    }
    say("  rounds (msgs/s):" + perRound);
    return new Result[] {sumA, sumB};
  }

  /** The server's WAL position in bytes. */
  private long walPosition() throws SQLException {
    try (Connection c = db.connection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /** A raw worker: one pinned connection (autocommit) and one prepared statement, for the whole phase. */
  private abstract static class RawWorker implements Worker {
    final Connection connection;
    final PreparedStatement ps;

    RawWorker(HikariDataSource pool, String sql) throws SQLException {
      connection = pool.getConnection();
      connection.setAutoCommit(true);
      ps = connection.prepareStatement(sql);
    }

    @Override
    public void close() throws SQLException {
      try {
        ps.close();
      } finally {
        connection.close();
      }
    }
  }

  private static String multiRowInsert(int rowsPerStatement) {
    StringBuilder b = new StringBuilder("INSERT INTO " + RAW_TABLE + " (partition, payload) VALUES ");
    for (int i = 0; i < rowsPerStatement; i++) {
      b.append(i == 0 ? "" : ", ").append("(?, ?::jsonb)");
    }
    return b.toString();
  }

  /** {@code k} distinct values from [0, n). */
  static int[] pickDistinct(SplittableRandom random, int n, int k) {
    int[] out = new int[k];
    int filled = 0;
    while (filled < k) {
      int v = random.nextInt(n);
      boolean seen = false;
      for (int j = 0; j < filled; j++) {
        seen |= out[j] == v;
      }
      if (!seen) {
        out[filled++] = v;
      }
    }
    return out;
  }

  static long percentile(long[] sorted, double p) {
    if (sorted.length == 0) {
      return 0;
    }
    int i = (int) Math.ceil(p * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
  }

  String queueName(String phase) {
    return "bench-" + runId + "-" + phase;
  }

  private void deleteQueue(String q) {
    long t0 = System.nanoTime();
    try {
      queen.queue(q).delete();
      say(String.format(Locale.ROOT, "  (deleted queue %s in %.1f s)", q, (System.nanoTime() - t0) / 1e9));
    } catch (RuntimeException e) {
      say("  WARN: could not delete queue " + q + ": " + e);
    }
  }

  void truncateRaw() throws SQLException {
    try (Connection c = db.connection(); Statement s = c.createStatement()) {
      s.execute("TRUNCATE " + RAW_TABLE + " RESTART IDENTITY");
    }
  }

  /**
   * Starts a measured phase from the same state for both sides: dead tuples vacuumed, statistics fresh (what autovacuum would
   * eventually do, done now so it does not land inside a window at random), and a checkpoint so the window does not pay for
   * the previous phase's dirty pages.
   */
  void settle() throws SQLException {
    long t0 = System.nanoTime();
    try (Connection c = db.connection(); Statement s = c.createStatement()) {
      s.execute("VACUUM (ANALYZE)");
      try {
        s.execute("CHECKPOINT");
      } catch (SQLException e) {
        // not a superuser on an external server: skip it, both sides alike
      }
    }
    long ms = (System.nanoTime() - t0) / 1_000_000;
    if (ms > 2_000) {
      say("  (vacuum + checkpoint took " + ms + " ms)");
    }
  }

  private void throughput(String name, Result queenR, Result rawR, double target, String note) {
    double ratio = queenR.perSecond() / rawR.perSecond();
    rows.add(new Row(name, num(queenR.perSecond(), 0), num(rawR.perSecond(), 0), "msgs/s", num(ratio, 3), ">= " + num(target, 2),
        verdict(ratio >= target), note));
    lines.add("RATIO " + name + " " + num(ratio, 3));
    lines.add(figure(name + "_msgs_per_s", queenR.perSecond(), "msgs/s"));
    lines.add(figure(name + "_raw_msgs_per_s", rawR.perSecond(), "msgs/s"));
  }

  static String figure(String name, double value, String unit) {
    return "FIGURE " + name + " " + num(value, 3) + " " + unit;
  }

  static String verdict(boolean met) {
    return met ? "met" : "MISSED";
  }

  static String num(double v, int decimals) {
    return String.format(Locale.ROOT, "%." + decimals + "f", v);
  }

  private static void progress(String what, Result r) {
    say(String.format(Locale.ROOT, "  %-40s %,12.0f msgs/s  (%,d messages in %.2f s; %,d in all)", what, r.perSecond(),
        r.messages(), r.seconds(), r.total()));
  }

  static void say(String line) {
    System.out.println(line);
  }

  private void printTable() {
    say("");
    String fmt = "%-21s %14s %14s %-7s %8s %8s %-7s %s%n";
    System.out.printf(Locale.ROOT, fmt, "figure", "Queen", "baseline", "unit", "ratio", "target", "", "notes");
    System.out.printf(Locale.ROOT, fmt, "-".repeat(21), "-".repeat(14), "-".repeat(14), "-".repeat(7), "-".repeat(8), "-".repeat(8),
        "-".repeat(7), "-".repeat(20));
    for (Row r : rows) {
      System.out.printf(Locale.ROOT, fmt, r.name(), r.queen(), r.baseline(), r.unit(), r.ratio(), r.target(), r.verdict(),
          r.note() == null ? "" : r.note());
    }
    say("");
    for (String line : lines) {
      say(line);
    }
  }

  private void closeAll() {
    if (queen != null) {
      try {
        queen.close();
      } catch (RuntimeException e) {
        say("WARN: Queen.close failed: " + e);
      }
    }
    for (HikariDataSource pool : new HikariDataSource[] {queenPool, rawPool}) {
      if (pool != null) {
        pool.close();
      }
    }
    if (db != null) {
      try {
        db.close();
      } catch (RuntimeException e) {
        say("WARN: could not drop the benchmark database: " + e);
      }
    }
  }
}
