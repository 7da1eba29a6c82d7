package io.queen.bench;

import io.queen.ConnectorStatus;
import io.queen.PushItem;
import io.queen.Queen;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code RATIO sink_upsert}: rows per second through an upsert sink draining a backlog, against a raw
 * batched upsert of the same rows over JDBC with one connection and the sink's batch size (500), in the
 * same run. The sink runs with its defaults (one worker, so one connection to the target, batches of 500)
 * and writes into the benchmark's own database. Rows: an id (the partition key, 256 partitions), a jsonb
 * customer and a numeric total; every id is written twice (an insert, then an update). An untimed round of
 * half the rows runs first on both sides (unless {@code --warmup 0}), so that the timed drain, about a
 * second and a half, measures the sink's compiled code rather than the JIT compiling it.
 */
final class SinkBench {
  private static final int ROWS = 40_000;
  private static final int PARTITIONS = 256;
  private static final int BATCH = 500;

  private final QueenBenchmark bench;

  SinkBench(QueenBenchmark bench) {
    this.bench = bench;
  }

  void sinkUpsert() throws Exception {
    int rows = (int) Math.max(2_000, ROWS * bench.scale());
    if (bench.options().warmup().isZero()) {
      QueenBenchmark.say("  no warm-up round (--warmup 0): both sides run cold, the sink's code mostly compiled meanwhile");
    } else {
      // untimed: the sink's path (pop, decode, the target transaction, the ack) is compiled by the JIT before the
      // timed drain, which lasts about a second and a half; the raw side gets the same round
      Round w = round("warm", rows / 2);
      QueenBenchmark.say(String.format(Locale.ROOT, "  warm-up round (untimed figures): sink %,.0f rows/s, raw %,.0f rows/s",
          w.queenRate, w.rawRate));
    }
    Round r = round("timed", rows);
    double ratio = r.queenRate / r.rawRate;
    String note = String.format(Locale.ROOT, "%,d messages (each id twice) over %d partitions drained by an upsert"
        + " sink (1 worker, batches of %d) vs jsonb_populate_recordset upserts of %d on 1 connection", rows, PARTITIONS,
        BATCH, BATCH);
    bench.row("sink_upsert", QueenBenchmark.num(r.queenRate, 0), QueenBenchmark.num(r.rawRate, 0), "rows/s",
        QueenBenchmark.num(ratio, 3), ">= 0.5", ratio >= 0.5 ? "met" : "MISSED", note);
    bench.line("RATIO sink_upsert " + QueenBenchmark.num(ratio, 3));
    bench.line(QueenBenchmark.figure("sink_rows_per_s", r.queenRate, "rows/s"));
  }

  /** Rows per second of one round: the sink's drain, then the raw upserts of the same rows. */
  private record Round(double queenRate, double rawRate) {}

  private Round round(String tag, int rows) throws Exception {
    Queen queen = bench.queen();
    String q = "bench-sink-" + tag + "-" + Long.toHexString(System.nanoTime());
    String sinkTable = "sink_rows_" + tag;
    String rawTable = "raw_rows_" + tag;
    String sinkName = "bench-sink-" + tag;
    try (Connection c = bench.db().connection(); Statement st = c.createStatement()) {
      st.execute("drop table if exists " + sinkTable + ", " + rawTable);
      st.execute("create table " + sinkTable + " (id bigint primary key, customer jsonb, total numeric(12,2))");
      st.execute("create table " + rawTable + " (id bigint primary key, customer jsonb, total numeric(12,2))");
    }
    // the backlog: every id twice (insert, then update), ids routed to their partition
    List<PushItem> items = new ArrayList<>(rows);
    for (int i = 0; i < rows; i++) {
      long id = i % (rows / 2);
      items.add(PushItem.of(String.valueOf(id % PARTITIONS), Map.of("id", id, "customer", Map.of("name", "c" + id,
          "tier", i < rows / 2 ? "silver" : "gold"), "total", (i < rows / 2 ? "12.50" : "15.00"))));
    }
    for (int from = 0; from < rows; from += 1000) {
      queen.queue(q).push(items.subList(from, Math.min(rows, from + 1000)));
    }
    // Queen: the sink drains the backlog
    long t0 = System.nanoTime();
    queen.connectors().put(sinkName, "{\"kind\":\"sink\",\"sink\":{\"queue\":\"" + q
        + "\",\"table\":\"public." + sinkTable + "\",\"mode\":\"upsert\",\"batchSize\":" + BATCH + "}}");
    long deadline = t0 + 600_000_000_000L;
    long applied = 0;
    long firstAt = 0;
    long firstApplied = 0;
    while (System.nanoTime() < deadline) {
      ConnectorStatus s = queen.connectors().status(sinkName).orElse(null);
      applied = s == null ? 0 : s.counters().getOrDefault("applied", 0L);
      if (applied > 0 && firstAt == 0) {
        // timed from the first applied batch: the time the registry takes to start the sink is not the sink's rate
        firstAt = System.nanoTime();
        firstApplied = applied;
      }
      if (applied >= rows) {
        break;
      }
      if (s != null && "error".equals(s.phase())) {
        throw new IllegalStateException("sink error " + s.errorCode() + ": " + s.error());
      }
      Thread.sleep(20);
    }
    long end = System.nanoTime();
    double startSeconds = (firstAt - t0) / 1e9;
    double queenSeconds = (end - firstAt) / 1e9;
    queen.connectors().delete(sinkName);
    if (applied < rows) {
      throw new IllegalStateException("the sink applied " + applied + " of " + rows + " rows in time");
    }
    // raw: the same rows, batched upserts of the same size over one connection
    String sql = "insert into " + rawTable + " (id, customer, total) select r.id, r.customer, r.total"
        + " from jsonb_populate_recordset(null::" + rawTable + ", ?::jsonb) r"
        + " on conflict (id) do update set customer = excluded.customer, total = excluded.total";
    com.fasterxml.jackson.databind.ObjectMapper mapper = new com.fasterxml.jackson.databind.ObjectMapper();
    long r0 = System.nanoTime();
    try (Connection c = bench.db().connection(); PreparedStatement st = c.prepareStatement(sql)) {
      c.setAutoCommit(false);
      for (int from = 0; from < rows; from += BATCH) {
        List<Object> batch = new ArrayList<>();
        for (PushItem it : items.subList(from, Math.min(rows, from + BATCH))) {
          batch.add(it.payload());
        }
        st.setString(1, mapper.writeValueAsString(batch));
        st.executeUpdate();
        c.commit();
      }
    }
    double rawSeconds = (System.nanoTime() - r0) / 1e9;
    QueenBenchmark.say(String.format(Locale.ROOT, "  %s: sink started %.2f s after put; then %,d rows in %.2f s; raw: %,d"
        + " rows in %.2f s", tag, startSeconds, rows - firstApplied, queenSeconds, rows, rawSeconds));
    bench.deleteQueue(queen, q);
    return new Round((rows - firstApplied) / queenSeconds, rows / rawSeconds);
  }
}
