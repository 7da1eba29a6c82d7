package io.queen.bench;

import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.TestDatabase;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;

/**
 * The source connector's figures. {@code RATIO source_vs_raw}: rows per second from the WAL into Queen (a 100,000-row
 * load committed in transactions of 100 while the source is disabled, then drained: from its first message to the
 * last) against the raw pgoutput decode rate of the same WAL (a second slot on the same publication read with
 * pgjdbc's replication stream, every message parsed down to its column texts, then discarded), same run, after both
 * sides ran as many rows once unmeasured ({@link #jitWarmup}).
 * {@code FIGURE source_other_db_rows_per_s} (and {@code source_other_db_vs_raw}, phase source_other_db, with {@code
 * --long}): the same, with the source table in another database of the same server, which Queen does not write to,
 * read through the document's connection block.
 * {@code FIGURE source_update_rows_per_s} and {@code source_updates_vs_raw}: the same drain of one update per row of
 * the measured load, each change into a partition that exists. {@code FIGURE source_ceiling_rows_per_s} ({@link
 * #ceiling}): what storing a partition and a message per change costs by itself, against the same raw decode.
 * {@code FIGURE source_e2e_latency_p50_ms}: commit on the table to message stored in Queen (the row's
 * {@code clock_timestamp()} against the message's {@code createdAt}, both the database's clock) at 200
 * transactions per second. {@code FIGURE latency_source_p50_ms}, {@code _p99_ms} and {@code _max_ms} ({@link
 * #latencySource}, phase latency_source): commit on the table to the handler of a {@code consume(...)} loop.
 */
final class SourceBench {
  private static final int ROWS = 100_000;
  private static final int PER_TX = 100;
  private static final String NAME = "bench-src";

  private final QueenBenchmark bench;

  SourceBench(QueenBenchmark bench) {
    this.bench = bench;
  }

  /** One measured source: its table's database, its connector's name, its document's connection block. */
  private static final class Run {
    final TestDatabase db;
    final String name;
    final String connection;
    final String queue = "bench-src-" + Long.toHexString(System.nanoTime());
    /** The id of the next row to insert. */
    int first = 1;

    Run(TestDatabase db, String name, String connection) {
      this.db = db;
      this.name = name;
      this.connection = connection;
    }

    String publication() {
      return "queen_" + name.replace('-', '_');
    }

    String doc(boolean enabled) {
      return "{\"kind\":\"source\",\"enabled\":" + enabled + connection + ",\"source\":{\"tables\":[{\"table\":"
          + "\"public.src_rows\",\"queue\":\"" + queue + "\"}],\"snapshot\":\"never\"}}";
    }
  }

  /** The measured load: {@value #ROWS} rows times {@code --scale}, whole transactions of {@value #PER_TX}. */
  private int rows() {
    return (int) Math.max(PER_TX * 10, ROWS * bench.scale()) / PER_TX * PER_TX;
  }

  /** What one drain measured. */
  private record Drain(double queenRate, double rawRate, String line) {}

  void sourceVsRaw() throws Exception {
    Queen queen = bench.queen();
    int rows = rows();
    Run same = new Run(bench.db(), NAME, "");
    Drain d = drain(queen, same, rows);
    double ratio = d.queenRate() / d.rawRate();
    QueenBenchmark.say(d.line());
    bench.row("source_vs_raw", QueenBenchmark.num(d.queenRate(), 0), QueenBenchmark.num(d.rawRate(), 0), "rows/s",
        QueenBenchmark.num(ratio, 3), ">= 0.5", ratio >= 0.5 ? "met" : "MISSED", String.format(Locale.ROOT,
            "%,d rows inserted in transactions of %d, drained from the slot into Queen vs read and decoded by pgjdbc",
            rows, PER_TX));
    bench.line("RATIO source_vs_raw " + QueenBenchmark.num(ratio, 3));
    bench.line(QueenBenchmark.figure("source_rows_per_s", d.queenRate(), "rows/s"));

    // the same number of updates, each to a row (a partition) that exists
    report("source_updates", updateDrain(queen, same, rows), " (updates)",
        "the same rows updated, each change into its existing partition", "source_update_rows_per_s",
        "source_updates_vs_raw");

    // latency at moderate load: 200 one-row transactions per second for 5 s
    latency(queen, same, same.first - 1);
    queen.connectors().put(same.name, same.doc(false));
    awaitPhase(queen, same.name, "disabled");
    double ceiling = ceiling(same);
    double ceilingRatio = ceiling / d.rawRate();
    bench.row("source_ceiling", QueenBenchmark.num(ceiling, 0), QueenBenchmark.num(d.rawRate(), 0), "rows/s",
        QueenBenchmark.num(ceilingRatio, 3), "", "", "the drained rows copied by SQL into tables of the same shape,"
            + " 1,000 per transaction: a partition and a message per change, no decoding");
    bench.line(QueenBenchmark.figure("source_ceiling_rows_per_s", ceiling, "rows/s"));
    bench.line(QueenBenchmark.figure("source_ceiling_vs_raw", ceilingRatio, ""));
    bench.line(QueenBenchmark.figure("source_vs_ceiling", d.queenRate() / ceiling, ""));
    finish(queen, same);
  }

  /**
   * The storage cost of a partition per row key, measured apart from everything else the source does: the drained
   * queue's partitions and the first message of each (a partition and a message per change, as the insert drain
   * stored them) copied by {@code INSERT ... SELECT}, 1,000 partitions and their messages per transaction from one
   * connection (the source has one committer), into two fresh tables made {@code LIKE} Queen's
   * {@code partitions} and {@code messages} with their indexes and defaults (no foreign key, no trigger). No
   * decoding, no JSON building, no network per row, no look-up of what exists: a bound on any source that stores a
   * partition and a message per change in this database. Returns messages copied per second.
   */
  private double ceiling(Run run) throws SQLException {
    sql(run, "drop table if exists bench_ceiling_messages", "drop table if exists bench_ceiling_partitions",
        "create table bench_ceiling_partitions (like queen.partitions including all)",
        "create table bench_ceiling_messages (like queen.messages including all)");
    List<Long> ids = new ArrayList<>();
    try (Connection c = run.db.connection(); PreparedStatement st = c.prepareStatement("select p.id from"
        + " queen.partitions p join queen.queues q on q.id = p.queue_id where q.name = ? order by p.id")) {
      st.setString(1, run.queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          ids.add(rs.getLong(1));
        }
      }
    }
    long copied = 0;
    long t0;
    try (Connection c = run.db.connection();
        PreparedStatement parts = c.prepareStatement("insert into bench_ceiling_partitions overriding system value select * from"
            + " queen.partitions where id = any(?)");
        PreparedStatement msgs = c.prepareStatement("insert into bench_ceiling_messages select * from queen.messages"
            + " where partition_id = any(?) and \"offset\" = 0")) {
      c.setAutoCommit(false);
      t0 = System.nanoTime();
      for (int from = 0; from < ids.size(); from += 1000) {
        java.sql.Array chunk = c.createArrayOf("bigint", ids.subList(from, Math.min(ids.size(), from + 1000)).toArray());
        parts.setArray(1, chunk);
        parts.executeUpdate();
        msgs.setArray(1, chunk);
        copied += msgs.executeUpdate();
        c.commit();
      }
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    QueenBenchmark.say(String.format(Locale.ROOT, "  ceiling: %,d partitions and %,d messages copied by SQL in %.2f s",
        ids.size(), copied, seconds));
    sql(run, "drop table bench_ceiling_messages", "drop table bench_ceiling_partitions");
    return copied / seconds;
  }

  /**
   * source_other_db (with {@code --long} or by name): the same load from a database of the same server that Queen
   * does not write to, through the document's connection block. The walsender then skips Queen's own WAL records
   * without decoding them (they name another database); this measures what that is worth.
   */
  void sourceOtherDb() throws Exception {
    Queen queen = bench.queen();
    int rows = rows();
    try (TestDatabase other = bench.db().server().createDatabase("benchsrc")) {
      String conn = ",\"connection\":{\"host\":\"" + other.host() + "\",\"port\":" + other.port()
          + ",\"database\":\"" + other.name() + "\",\"user\":\"" + other.user() + "\""
          + (other.password() == null ? "" : ",\"password\":\"" + other.password() + "\"") + ",\"sslMode\":\"disable\"}";
      Run apart = new Run(other, NAME + "-apart", conn);
      report("source_other_db", drain(queen, apart, rows), " (the table in a database Queen does not write to)",
          "the same, the source table in another database of the server", "source_other_db_rows_per_s",
          "source_other_db_vs_raw");
      finish(queen, apart);
    }
  }

  /** One drain's line, table row and two {@code FIGURE} lines: its rate, and its ratio to its own raw decode. */
  private void report(String row, Drain d, String suffix, String note, String rateFigure, String ratioFigure) {
    double r = d.queenRate() / d.rawRate();
    QueenBenchmark.say(d.line() + suffix);
    bench.row(row, QueenBenchmark.num(d.queenRate(), 0), QueenBenchmark.num(d.rawRate(), 0), "rows/s",
        QueenBenchmark.num(r, 3), "", "", note);
    bench.line(QueenBenchmark.figure(rateFigure, d.queenRate(), "rows/s"));
    bench.line(QueenBenchmark.figure(ratioFigure, r, ""));
  }

  /**
   * Creates {@code src_rows} in the run's database, starts the source (and warms both sides up, unless {@code
   * --jit-warmup 0}), stops it, loads {@code rows} rows while it is stopped, times a raw slot's decode of them, then
   * the source's drain from its first message to its last.
   */
  private Drain drain(Queen queen, Run run, int rows) throws Exception {
    sql(run, "drop table if exists src_rows", "create table src_rows (id bigint primary key, customer jsonb not null,"
        + " total numeric(12,2) not null, note text, at timestamptz not null default clock_timestamp())");
    queen.connectors().put(run.name, run.doc(true));
    awaitPhase(queen, run.name, "streaming");
    if (!bench.options().jitWarmup().isZero()) {
      jitWarmup(queen, run, rows);
    }
    return timedDrain(queen, run, rows, () -> load(run, rows));
  }

  /**
   * The same drain of {@code rows} updates, one per row of the measured load (in transactions of {@value #PER_TX}):
   * every change goes to a partition that exists, as most changes of a table past its snapshot do.
   */
  private Drain updateDrain(Queen queen, Run run, int rows) throws Exception {
    int from = run.first - rows;
    return timedDrain(queen, run, rows, () -> inTransactions(run, "update src_rows set total = total + 1,"
        + " note = 'updated' where id between ? and ?", from, rows));
  }

  /** Something that writes the changes a drain measures. */
  private interface Load {
    void run() throws SQLException;
  }

  /**
   * Stops the running source, writes {@code rows} changes with {@code loader} while it is stopped, times a raw slot's
   * decode of them, then the source's drain from its first message to its last.
   */
  private Drain timedDrain(Queen queen, Run run, int rows, Load loader) throws Exception {
    // the backlog: the source stopped (its slot stays), a raw slot on the same publication, the load
    queen.connectors().put(run.name, run.doc(false));
    awaitPhase(queen, run.name, "disabled");
    sql(run, "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = 'bench_raw'",
        "select pg_create_logical_replication_slot('bench_raw', 'pgoutput')");
    loader.run();

    // raw: the same WAL decoded and discarded
    long r0 = System.nanoTime();
    long decodedRows = rawDecode(run, "bench_raw", rows);
    double rawSeconds = (System.nanoTime() - r0) / 1e9;

    // Queen: the source drains the backlog, timed from its first message to its last
    queen.connectors().put(run.name, run.doc(true));
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(10);
    long firstAt = 0;
    long firstCount = 0;
    long count = 0;
    while (System.nanoTime() < deadline) {
      count = messages(queen, run);
      if (count > 0 && firstAt == 0) {
        firstAt = System.nanoTime();
        firstCount = count;
      }
      if (count >= rows) {
        break;
      }
      Thread.sleep(5);
    }
    long end = System.nanoTime();
    if (count < rows) {
      throw new IllegalStateException("the source pushed " + count + " of " + rows + " changes in time");
    }
    double queenSeconds = (end - firstAt) / 1e9;
    return new Drain((rows - firstCount) / queenSeconds, decodedRows / rawSeconds, String.format(Locale.ROOT,
        "  source: %,d changes in %.2f s; raw pgoutput decode: %,d rows in %.2f s", rows - firstCount, queenSeconds,
        decodedRows, rawSeconds));
  }

  private void finish(Queen queen, Run run) throws SQLException {
    queen.connectors().delete(run.name);
    sql(run, "select pg_drop_replication_slot('bench_raw')");
    bench.deleteQueue(queen, run.queue);
  }

  /**
   * Both sides' code run once before either is measured, as the push phases' {@code --jit-warmup} does (0 skips it):
   * as many rows as the measured load streamed by the running source into its queue, and the same rows read through a
   * raw slot of their own, decoded and discarded. Without it the drain ran beside the just-in-time compiler (its
   * threads took a third to half of a core of the two during the drain) while the raw side, timed after it, found
   * pgjdbc's replication code compiled.
   */
  private void jitWarmup(Queen queen, Run run, int rows) throws Exception {
    QueenBenchmark.say(String.format(Locale.ROOT, "  JIT warm-up: %,d rows through the source and a raw slot (not measured)",
        rows));
    sql(run, "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = 'bench_raw_warm'",
        "select pg_create_logical_replication_slot('bench_raw_warm', 'pgoutput')");
    int from = run.first;
    load(run, rows);
    rawDecode(run, "bench_raw_warm", rows);
    sql(run, "select pg_drop_replication_slot('bench_raw_warm')");
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
    while (messages(queen, run) < rows) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the source did not stream the warm-up rows " + from + ".. in 5 minutes");
      }
      Thread.sleep(20);
    }
  }

  /** The running source's {@code messages} counter (0 for each new document version: a new instance counts). */
  private static long messages(Queen queen, Run run) {
    ConnectorStatus s = queen.connectors().status(run.name).orElse(null);
    if (s != null && "error".equals(s.phase())) {
      throw new IllegalStateException("source error " + s.errorCode() + ": " + s.error());
    }
    return s == null ? 0 : s.counters().getOrDefault("messages", 0L);
  }

  /** The run's next {@code count} rows, inserted in transactions of {@value #PER_TX}. */
  private static void load(Run run, int count) throws SQLException {
    inTransactions(run, "insert into src_rows (id, customer, total, note) select g, jsonb_build_object('name', 'c' || g,"
        + " 'tier', 'gold'), (g % 1000) + 0.25, 'row ' || g from generate_series(?::bigint, ?::bigint) g", run.first,
        count);
    run.first += count;
  }

  /** Runs {@code sql} once per {@value #PER_TX} ids from {@code from}, bound to the first and last id of each. */
  private static void inTransactions(Run run, String sql, int from, int count) throws SQLException {
    try (Connection c = run.db.connection(); PreparedStatement st = c.prepareStatement(sql)) {
      for (int id = from; id < from + count; id += PER_TX) {
        st.setLong(1, id);
        st.setLong(2, id + PER_TX - 1);
        st.executeUpdate();
      }
    }
  }

  private void latency(Queen queen, Run run, int after) throws Exception {
    String q = run.queue;
    int n = (int) Math.max(200, 1000 * bench.scale());
    try (Connection c = bench.db().connection(); PreparedStatement st = c.prepareStatement(
        "insert into src_rows (id, customer, total) values (?, '{}', 1)")) {
      long t0 = System.nanoTime();
      for (int i = 1; i <= n; i++) {
        st.setLong(1, after + i);
        st.executeUpdate();
        long due = t0 + i * 5_000_000L; // 200 per second
        long wait = due - System.nanoTime();
        if (wait > 0) {
          Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
        }
      }
    }
    // the messages of those rows, and each row's commit-time stamp
    List<Double> lags = new ArrayList<>();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    java.util.Map<Long, java.time.Instant> at = new java.util.HashMap<>();
    try (Connection c = bench.db().connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select id, at from src_rows where id > " + after)) {
      while (rs.next()) {
        at.put(rs.getLong(1), rs.getTimestamp(2).toInstant());
      }
    }
    while (lags.size() < n && System.nanoTime() < deadline) {
      List<Message> got = queen.queue(q).group("latency").subscription(SubscriptionMode.ALL).autoAck(true)
          .batch(1000).partitions(1000).waitFor(Duration.ofMillis(200)).pop();
      for (Message m : got) {
        long id = m.payload().get("after").get("id").asLong();
        java.time.Instant committed = at.get(id);
        if (committed != null) {
          lags.add(Duration.between(committed, m.createdAt()).toNanos() / 1e6);
        }
      }
    }
    Collections.sort(lags);
    double p50 = lags.isEmpty() ? Double.NaN : lags.get(lags.size() / 2);
    double p99 = lags.isEmpty() ? Double.NaN : lags.get(Math.min(lags.size() - 1, (int) (lags.size() * 0.99)));
    QueenBenchmark.say(String.format(Locale.ROOT, "  source latency at 200 tx/s: %d rows, p50 %.1f ms, p99 %.1f ms",
        lags.size(), p50, p99));
    bench.line(QueenBenchmark.figure("source_e2e_latency_p50_ms", p50, "ms"));
    bench.line(QueenBenchmark.figure("source_e2e_latency_p99_ms", p99, "ms"));
  }

  /**
   * latency_source: commit on the table to the handler of a {@code consume(...)} loop, through the source. One-row
   * transactions at {@code --latency-rate} per second (default 500) from one connection, each row a new key (so a new
   * partition of one message), for {@code --source-latency-seconds} (default 60) after {@code --warmup}, into the
   * README's plain {@code consume(...)} with {@code concurrency(4)} and the default batch and partitions. Each row
   * carries its commit-time clock ({@code clock_timestamp()} of its insert, microseconds) and the handler subtracts it
   * from its own clock (one machine, one clock). Also counts deliveries of a second attempt: a message whose first
   * lease expired before it reached a handler. With {@code --source-latency-updates} every other commit updates the row
   * the commit before inserted (its {@code t} again): a key gets two changes, one commit apart, and each is measured.
   */
  void latencySource() throws Exception {
    Queen queen = bench.queen();
    QueenBenchmark.Options o = bench.options();
    int rate = o.latencyRate();
    long warmupCount = Math.round(rate * o.warmup().toMillis() / 1000.0);
    long measuredCount = Math.round(rate * o.sourceLatencyWindow().toMillis() / 1000.0);
    int total = (int) (warmupCount + measuredCount);
    long intervalNanos = 1_000_000_000L / rate;
    boolean updates = o.sourceLatencyUpdates();
    Run run = new Run(bench.db(), NAME + "-lat", "");
    sql(run, "drop table if exists src_lat", "create table src_lat (id bigint primary key, t bigint not null)");
    queen.connectors().put(run.name, "{\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.src_lat\","
        + "\"queue\":\"" + run.queue + "\"}],\"snapshot\":\"never\"}}");
    awaitPhase(queen, run.name, "streaming");
    java.util.concurrent.atomic.AtomicLongArray latencies = new java.util.concurrent.atomic.AtomicLongArray(total);
    java.util.concurrent.atomic.AtomicLongArray stored = new java.util.concurrent.atomic.AtomicLongArray(total);
    java.util.concurrent.atomic.AtomicLong received = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong duplicates = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong retried = new java.util.concurrent.atomic.AtomicLong();
    io.queen.Subscription sub = queen.queue(run.queue).group("lat").subscription(SubscriptionMode.ALL).concurrency(4)
        .consume(msg -> {
          java.time.Instant now = java.time.Instant.now();
          long nowMicros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
          com.fasterxml.jackson.databind.JsonNode after = msg.payload().get("after");
          long id = Long.parseLong(after.get("id").asText());
          // the commit that made the change: without updates one per row; with them the row's insert, then its update
          int seq = (int) (updates ? (id - 1) * 2 + ("u".equals(msg.payload().get("op").asText()) ? 1 : 0) : id - 1);
          long committed = Long.parseLong(after.get("t").asText());
          if (msg.attempt() > 1) {
            retried.incrementAndGet();
          }
          if (seq >= 0 && seq < total && latencies.compareAndSet(seq, 0, Math.max(1, nowMicros - committed))) {
            java.time.Instant at = msg.createdAt();
            stored.set(seq, at.getEpochSecond() * 1_000_000L + at.getNano() / 1_000 - committed);
            received.incrementAndGet();
          } else {
            duplicates.incrementAndGet();
          }
        });
    long[] commitNanos = new long[total];
    try {
      try (Connection c = run.db.connection(); PreparedStatement st = c.prepareStatement(
          "insert into src_lat (id, t) values (?, (extract(epoch from clock_timestamp()) * 1000000)::bigint)");
          PreparedStatement up = c.prepareStatement(
          "update src_lat set t = (extract(epoch from clock_timestamp()) * 1000000)::bigint where id = ?")) {
        long start = System.nanoTime() + 200_000_000L;
        for (int seq = 0; seq < total; seq++) {
          long due = start + seq * intervalNanos;
          long wait;
          while ((wait = due - System.nanoTime()) > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(wait);
          }
          long t0 = System.nanoTime();
          PreparedStatement change = updates && seq % 2 == 1 ? up : st;
          change.setLong(1, updates ? seq / 2 + 1 : seq + 1);
          change.executeUpdate();
          commitNanos[seq] = System.nanoTime() - t0;
        }
      }
      // long enough for a message that waited out a lease (30 s by default) to come
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(45);
      while (received.get() < total && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      QueenBenchmark.say("  committed " + total + (updates ? " inserts and updates" : " inserts") + " at " + rate
          + "/s, handled " + received.get() + ", duplicates " + duplicates.get() + ", second attempts " + retried.get()
          + ", handler failures " + sub.failed());
    } finally {
      sub.close(Duration.ofSeconds(5));
    }
    long[] measured = new long[(int) measuredCount];
    long[] storing = new long[(int) measuredCount];
    int m = 0;
    for (int seq = (int) warmupCount; seq < total; seq++) {
      long v = latencies.get(seq);
      if (v != 0) {
        storing[m] = stored.get(seq) * 1_000;
        measured[m++] = v * 1_000; // nanoseconds, as QueenBenchmark.percentile's callers pass
      }
    }
    storing = java.util.Arrays.copyOf(storing, m);
    java.util.Arrays.sort(storing);
    long missing = measuredCount - m;
    measured = java.util.Arrays.copyOf(measured, m);
    java.util.Arrays.sort(measured);
    long[] commits = java.util.Arrays.copyOfRange(commitNanos, (int) warmupCount, total);
    java.util.Arrays.sort(commits);
    double p50 = QueenBenchmark.percentile(measured, 0.50) / 1e6;
    double p99 = QueenBenchmark.percentile(measured, 0.99) / 1e6;
    double max = (m == 0 ? 0 : measured[m - 1]) / 1e6;
    QueenBenchmark.say(String.format(Locale.ROOT, "  commit->handler over %d messages: p50 %.3f ms, p90 %.3f ms, p99 %.3f"
        + " ms, p99.9 %.3f ms, max %.3f ms; insert+commit p50 %.3f ms, p99 %.3f ms", m, p50,
        QueenBenchmark.percentile(measured, 0.90) / 1e6, p99, QueenBenchmark.percentile(measured, 0.999) / 1e6, max,
        QueenBenchmark.percentile(commits, 0.50) / 1e6, QueenBenchmark.percentile(commits, 0.99) / 1e6));
    // the message's createdAt is the start of the source's Queen transaction that stored it (the database's now())
    QueenBenchmark.say(String.format(Locale.ROOT, "  of which commit->stored (the source's transaction began): p50 %.3f ms,"
        + " p99 %.3f ms, max %.3f ms", QueenBenchmark.percentile(storing, 0.50) / 1e6,
        QueenBenchmark.percentile(storing, 0.99) / 1e6, (m == 0 ? 0 : storing[m - 1]) / 1e6));
    queen.connectors().delete(run.name);
    bench.deleteQueue(queen, run.queue);
    sql(run, "drop table src_lat");
    if (missing > 0) {
      throw new IllegalStateException(missing + " of " + measuredCount + " measured rows never reached the handler");
    }
    String note = rate + " one-row commits/s for " + o.sourceLatencyWindow().toSeconds() + " s through the source, a"
        + " new partition per row" + (updates ? ", each row inserted then updated" : "")
        + ", consume(...) with concurrency(4)";
    bench.row("latency_source_p50_ms", QueenBenchmark.num(p50, 3), "", "ms", "", "<= 5", QueenBenchmark.verdict(p50 <= 5),
        note);
    bench.row("latency_source_p99_ms", QueenBenchmark.num(p99, 3), "", "ms", "", "<= 25",
        QueenBenchmark.verdict(p99 <= 25), note);
    bench.row("latency_source_max_ms", QueenBenchmark.num(max, 3), "", "ms", "", "<= 250",
        QueenBenchmark.verdict(max <= 250), note + "; second attempts " + retried.get());
    bench.line(QueenBenchmark.figure("latency_source_p50_ms", p50, "ms"));
    bench.line(QueenBenchmark.figure("latency_source_p99_ms", p99, "ms"));
    bench.line(QueenBenchmark.figure("latency_source_max_ms", max, "ms"));
    bench.line(QueenBenchmark.figure("latency_source_second_attempts", retried.get(), ""));
  }

  /** Reads a raw slot from its start until {@code expectRows} changes, parsing each down to its column texts. */
  private long rawDecode(Run run, String slot, int expectRows) throws SQLException {
    String publication = run.publication();
    Properties p = new Properties();
    PGProperty.USER.set(p, run.db.user());
    if (run.db.password() != null) {
      PGProperty.PASSWORD.set(p, run.db.password());
    }
    PGProperty.REPLICATION.set(p, "database");
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "9.4");
    PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    long rows = 0;
    try (Connection c = DriverManager.getConnection(run.db.jdbcUrl(), p)) {
      PGReplicationStream stream = c.unwrap(PGConnection.class).getReplicationAPI().replicationStream().logical()
          .withSlotName(slot).withSlotOption("proto_version", 1)
          .withSlotOption("publication_names", publication).withStatusInterval(5, TimeUnit.SECONDS)
          .withAutomaticFlush(false).start();
      long lastCommitEnd = 0;
      while (rows < expectRows) {
        ByteBuffer b = stream.read();
        rows += parse(b);
        if (b.get(b.position()) == 'C') {
          lastCommitEnd = stream.getLastReceiveLSN().asLong();
        }
      }
      stream.setFlushedLSN(LogSequenceNumber.valueOf(lastCommitEnd));
      stream.close();
    }
    return rows;
  }

  /** One pgoutput message parsed as a decoder would (tuples into strings); returns 1 for a row change. */
  private static int parse(ByteBuffer buf) {
    ByteBuffer b = buf.duplicate();
    char tag = (char) b.get();
    switch (tag) {
      case 'I' -> {
        b.getInt();
        b.get();
        tuple(b);
        return 1;
      }
      case 'U', 'D' -> {
        b.getInt();
        char k = (char) b.get();
        tuple(b);
        if (tag == 'U' && k != 'N') {
          b.get();
          tuple(b);
        }
        return 1;
      }
      case 'R' -> {
        b.getInt();
        cstring(b);
        cstring(b);
        b.get();
        int n = b.getShort();
        for (int i = 0; i < n; i++) {
          b.get();
          cstring(b);
          b.getInt();
          b.getInt();
        }
        return 0;
      }
      default -> {
        return 0;
      }
    }
  }

  private static String[] tuple(ByteBuffer b) {
    int n = b.getShort();
    String[] out = new String[n];
    for (int i = 0; i < n; i++) {
      if (b.get() == 't') {
        int len = b.getInt();
        out[i] = new String(b.array(), b.arrayOffset() + b.position(), len, StandardCharsets.UTF_8);
        b.position(b.position() + len);
      }
    }
    return out;
  }

  private static String cstring(ByteBuffer b) {
    int start = b.position();
    while (b.get() != 0) {
      // to the NUL
    }
    return new String(b.array(), b.arrayOffset() + start, b.position() - start - 1, StandardCharsets.UTF_8);
  }

  private static void awaitPhase(Queen queen, String name, String phase) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline) {
      ConnectorStatus s = queen.connectors().status(name).orElse(null);
      if (s != null && s.phase().equals(phase)) {
        return;
      }
      if (s != null && "error".equals(s.phase())) {
        throw new IllegalStateException("source error " + s.errorCode() + ": " + s.error());
      }
      Thread.sleep(20);
    }
    throw new IllegalStateException("the source did not reach phase " + phase + " in 60 s");
  }

  private static void sql(Run run, String... statements) throws SQLException {
    try (Connection c = run.db.connection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }
}
