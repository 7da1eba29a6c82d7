package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The chunked snapshot against real PostgreSQL, driven by a logical slot read with SQL ({@link SnapshotDriver})
 * in place of the stream runtime: every row once, concurrent writers, the commit/visibility race, TOAST fills,
 * a restart mid-snapshot, composite keys and a schema change inside a window.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ChunkedSnapshotTest {
  /** Reads decimals as printed ({@code 1.50} stays {@code 1.50}), as the table's text does. */
  private static final ObjectMapper MAPPER = JsonMapper.builder().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .disable(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES).build();

  TestDatabase db;
  Connection c;
  final List<AutoCloseable> toClose = new ArrayList<>();
  final AtomicLong rowsCounted = new AtomicLong();

  @BeforeEach
  void open(TestDatabase db) throws SQLException {
    this.db = db;
    c = db.connection();
  }

  @AfterEach
  void close() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    c.close();
  }

  void sql(String... statements) throws SQLException {
    try (Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  static SnapshotTable table(String name) {
    return new SnapshotTable("public", name, "q_" + name, List.of(), false);
  }

  ChunkedSnapshot snapshot(SnapshotTable t, int chunkRows) {
    return snapshot(t, chunkRows, db::connection);
  }

  /** A snapshot whose chunk connection runs {@code atChunkStart} where each chunk's transaction begins. */
  ChunkedSnapshot snapshot(SnapshotTable t, int chunkRows, ChunkStart.Action atChunkStart) {
    return snapshot(t, chunkRows, ChunkStart.connector(db::connection, atChunkStart));
  }

  ChunkedSnapshot snapshot(SnapshotTable t, int chunkRows, ChunkedSnapshot.Connector connector) {
    ChunkedSnapshot s = new ChunkedSnapshot(List.of(t), chunkRows, connector, Values::apply,
        new SnapshotDriver.TestEvents(), rowsCounted::addAndGet,
        r -> new Thread(r, "queen-test-snapshot"));
    toClose.add(s);
    return s;
  }

  /** Once, at the first chunk's start (its low watermark written, nothing read yet): {@code statements}. */
  ChunkStart.Action onceAtFirstChunk(String... statements) {
    AtomicBoolean once = new AtomicBoolean();
    return chunk -> {
      if (once.compareAndSet(false, true)) {
        for (String st : statements) {
          run(st);
        }
      }
    };
  }

  SnapshotDriver driver(SnapshotTable t) throws SQLException {
    Connection dc = db.connection();
    toClose.add(dc);
    SnapshotDriver d = new SnapshotDriver(dc, t);
    toClose.add(d);
    return d;
  }

  static void awaitDone(ChunkedSnapshot s) {
    await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(20)).until(s::done);
  }

  static List<SourceEvent> ops(List<SourceEvent> events, String op) {
    return events.stream().filter(e -> payload(e).path("op").asText().equals(op)).toList();
  }

  /** The event's text as a tree. */
  static JsonNode payload(SourceEvent e) {
    try {
      return MAPPER.readTree(e.json());
    } catch (Exception x) {
      throw new AssertionError(x);
    }
  }

  static boolean isFill(SourceEvent e) {
    return e.transactionId().contains(":f");
  }

  /** Replays events per partition (the key) the way a cdc consumer would: r/c replace, u merges, d removes. */
  static Map<String, Map<String, String>> replay(List<SourceEvent> events) {
    Map<String, Map<String, String>> state = new HashMap<>();
    for (SourceEvent e : events) {
      String op = payload(e).path("op").asText();
      if (op.equals("d")) {
        state.remove(e.partition());
        continue;
      }
      Map<String, String> after = new LinkedHashMap<>();
      Iterator<Map.Entry<String, JsonNode>> it = payload(e).path("after").fields();
      while (it.hasNext()) {
        Map.Entry<String, JsonNode> f = it.next();
        after.put(f.getKey(), f.getValue().isNull() ? null : f.getValue().asText());
      }
      if (op.equals("u")) {
        state.computeIfAbsent(e.partition(), k -> new HashMap<>()).putAll(after);
      } else {
        state.put(e.partition(), new HashMap<>(after));
      }
    }
    return state;
  }

  Map<String, Map<String, String>> tableState(String query, String... keyCols) throws SQLException {
    Map<String, Map<String, String>> out = new HashMap<>();
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      int n = rs.getMetaData().getColumnCount();
      while (rs.next()) {
        Map<String, String> row = new HashMap<>();
        for (int i = 1; i <= n; i++) {
          row.put(rs.getMetaData().getColumnName(i), rs.getString(i));
        }
        List<String> k = new ArrayList<>();
        for (String kc : keyCols) {
          k.add(row.get(kc));
        }
        out.put(String.join("|", k), row);
      }
    }
    return out;
  }

  @Test
  void everyRowOnceAsAnReadEventInChunksOf700() throws Exception {
    sql("CREATE TABLE big5k (id bigint PRIMARY KEY, v text)",
        "INSERT INTO big5k SELECT g, 'row ' || g FROM generate_series(1, 5000) g");
    SnapshotTable t = table("big5k");
    SnapshotDriver d = driver(t);
    ChunkedSnapshot s = snapshot(t, 700);
    d.start(s);
    s.start();
    awaitDone(s);
    d.drain();

    List<SourceEvent> events = d.events();
    assertThat(events).allSatisfy(e -> assertThat(payload(e).path("op").asText()).isEqualTo("r"));
    assertThat(events).hasSize(5000);
    List<String> keys = events.stream().map(SourceEvent::partition).toList();
    List<String> expected = new ArrayList<>();
    for (int i = 1; i <= 5000; i++) {
      expected.add(Integer.toString(i));
    }
    assertThat(keys).isEqualTo(expected); // key order, each once
    assertThat(events.stream().map(SourceEvent::transactionId).distinct().count()).isEqualTo(5000);
    assertThat(events.stream().map(e -> payload(e).path("lsn").asText()).distinct().count()).isEqualTo(8);
    assertThat(payload(events.get(0)).path("after").path("v").asText()).isEqualTo("row 1");
    assertThat(events.get(0).transactionId()).matches("pg:test:s:[0-9A-F]{16}:0");
    assertThat(rowsCounted.get()).isEqualTo(5000);
    assertThat(d.markers()).isEqualTo(16); // one LW and one HW per chunk
    JsonNode p = s.progress();
    assertThat(p.path("done").asBoolean()).isTrue();
  }

  @Test
  void concurrentWritersNeverSeeAnOlderVersionAfterANewerOne() throws Exception {
    sql("CREATE SEQUENCE wver", "CREATE TABLE w (id int PRIMARY KEY, ver bigint NOT NULL, pad text)",
        "INSERT INTO w SELECT g, nextval('wver'), 'p' || g FROM generate_series(1, 3000) g");
    SnapshotTable t = table("w");
    SnapshotDriver d = driver(t);
    ChunkedSnapshot s = snapshot(t, 150);
    AtomicBoolean stop = new AtomicBoolean();
    List<Thread> writers = new ArrayList<>();
    List<Throwable> failures = new ArrayList<>();
    for (int w = 0; w < 2; w++) {
      Thread th = new Thread(() -> {
        try (Connection wc = db.connection(); Statement st = wc.createStatement()) {
          ThreadLocalRandom r = ThreadLocalRandom.current();
          while (!stop.get()) {
            wc.setAutoCommit(r.nextInt(3) != 0);
            int ops = wc.getAutoCommit() ? 1 : 1 + r.nextInt(3);
            for (int o = 0; o < ops; o++) {
              int id = 1 + r.nextInt(3300);
              int kind = r.nextInt(10);
              if (kind < 6) {
                st.execute("UPDATE w SET ver = nextval('wver'), pad = md5(random()::text) WHERE id = " + id);
              } else if (kind < 8) {
                st.execute("DELETE FROM w WHERE id = " + id);
              } else {
                st.execute("INSERT INTO w VALUES (" + id + ", nextval('wver'), 'new') ON CONFLICT DO NOTHING");
              }
            }
            if (!wc.getAutoCommit()) {
              wc.commit();
            }
          }
        } catch (SQLException e) {
          if (!"40P01".equals(e.getSQLState())) {
            synchronized (failures) {
              failures.add(e);
            }
          }
        }
      }, "writer-" + w);
      writers.add(th);
    }
    d.start(s);
    writers.forEach(Thread::start);
    Thread.sleep(200);
    s.start();
    awaitDone(s);
    stop.set(true);
    for (Thread th : writers) {
      th.join(10_000);
    }
    d.drain();
    assertThat(failures).isEmpty();

    List<SourceEvent> events = d.events();
    // the stream really ran during the snapshot: changes interleave with the chunks
    int lastRead = 0;
    for (int i = 0; i < events.size(); i++) {
      if (payload(events.get(i)).path("op").asText().equals("r")) {
        lastRead = i;
      }
    }
    assertThat(events.subList(0, lastRead).stream().filter(e -> !payload(e).path("op").asText().equals("r")))
        .hasSizeGreaterThan(50);
    // never an older version after a newer one, per key
    Map<String, Long> seen = new HashMap<>();
    for (SourceEvent e : events) {
      JsonNode ver = payload(e).path("after").path("ver");
      if (!ver.isMissingNode() && !ver.isNull()) {
        long v = Long.parseLong(ver.asText());
        Long before = seen.put(e.partition(), v);
        assertThat(before == null || before <= v)
            .as("key %s: version %s after %s (%s)", e.partition(), v, before, e.transactionId()).isTrue();
      }
    }
    // each row read at most once
    List<String> readKeys = ops(events, "r").stream().map(SourceEvent::partition).toList();
    assertThat(new HashSet<>(readKeys)).hasSameSizeAs(readKeys);
    // replayed, the events give exactly the table
    assertThat(replay(events)).isEqualTo(tableState("SELECT id, ver, pad FROM w", "id"));
  }

  @Test
  void aTransactionDecodedBeforeTheLowWatermarkButInvisibleToTheChunkDropsItsRows() throws Exception {
    sql("CREATE TABLE race (id int PRIMARY KEY, ver int NOT NULL)",
        "INSERT INTO race SELECT g, 1 FROM generate_series(1, 10) g");
    SnapshotTable t = table("race");
    SnapshotDriver d = driver(t);
    try (Connection running = db.connection(); Connection old = db.connection();
        Statement rst = running.createStatement(); Statement ost = old.createStatement()) {
      // a transaction running when the chunk's snapshot is taken (in its xip) that commits before LW
      running.setAutoCommit(false);
      rst.execute("UPDATE race SET ver = 2 WHERE id = 7");
      // the chunk's snapshot, taken now and imported by the chunk transaction later
      old.setAutoCommit(false);
      old.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
      String exported;
      try (ResultSet rs = ost.executeQuery("SELECT pg_export_snapshot()")) {
        rs.next();
        exported = rs.getString(1);
      }
      running.commit();
      // a transaction that starts after the snapshot (xid >= xmax) and commits before LW
      sql("UPDATE race SET ver = 2 WHERE id = 5");

      // each chunk's transaction imports it: the race, whatever the timing
      ChunkedSnapshot s = snapshot(t, 100, chunk -> {
        try (Statement st = chunk.createStatement()) {
          st.execute("SET TRANSACTION SNAPSHOT '" + exported + "'");
        }
      });
      d.start(s);
      s.start();
      awaitDone(s);
      d.drain();
      old.commit();
    }
    List<SourceEvent> events = d.events();
    Map<String, List<String>> byKey = new HashMap<>();
    for (SourceEvent e : events) {
      byKey.computeIfAbsent(e.partition(), k -> new ArrayList<>())
          .add(payload(e).path("op").asText() + payload(e).path("after").path("ver").asText());
    }
    // the chunk read ver 1 for rows 5 and 7; their ver 2 came first through the stream and stays last
    assertThat(byKey.get("5")).containsExactly("u2");
    assertThat(byKey.get("7")).containsExactly("u2");
    assertThat(ops(events, "r")).hasSize(8);
    assertThat(replay(events)).isEqualTo(tableState("SELECT id, ver FROM race", "id"));
  }

  @Test
  void xidsArePgoutput32BitsWidenedAgainstTheSnapshotsXid8() {
    long epoch1 = 1L << 32;
    ChunkReader.Visibility v = new ChunkReader.Visibility(epoch1 + 3, epoch1 + 10, Set.of(epoch1 + 4));
    assertThat(v.widen(0xFFFF_FFF0L)).isEqualTo(epoch1 - 16); // previous epoch: committed long ago
    assertThat(v.invisible(0xFFFF_FFF0L)).isFalse();
    assertThat(v.invisible(3)).isFalse();
    assertThat(v.invisible(4)).isTrue(); // in xip
    assertThat(v.invisible(9)).isFalse();
    assertThat(v.invisible(10)).isTrue(); // >= xmax
    assertThat(v.invisible(12)).isTrue();
  }

  @Test
  void aToastedColumnLeftUnchangedInsideTheWindowGetsAFillEvent() throws Exception {
    sql("CREATE TABLE toasty (id int PRIMARY KEY, n int NOT NULL, big text)",
        "ALTER TABLE toasty ALTER big SET STORAGE EXTERNAL",
        "INSERT INTO toasty SELECT g, g, repeat(md5(g::text), 200) FROM generate_series(1, 20) g");
    SnapshotTable t = table("toasty");
    SnapshotDriver d = driver(t);
    ChunkedSnapshot s = snapshot(t, 50, onceAtFirstChunk("UPDATE toasty SET n = n + 100 WHERE id = 3"));
    d.start(s);
    s.start();
    awaitDone(s);
    d.drain();

    List<SourceEvent> events = d.events();
    List<SourceEvent> row3 = events.stream().filter(e -> e.partition().equals("3")).toList();
    assertThat(row3).hasSize(2);
    assertThat(payload(row3.get(0)).path("op").asText()).isEqualTo("u");
    assertThat(payload(row3.get(0)).path("unchanged").toString()).isEqualTo("[\"big\"]");
    SourceEvent fill = row3.get(1);
    assertThat(isFill(fill)).isTrue();
    assertThat(fill.transactionId()).matches("pg:test:s:[0-9A-F]{16}:f19");
    assertThat(payload(fill).path("op").asText()).isEqualTo("u");
    assertThat(payload(fill).path("after").toString())
        .isEqualTo("{\"id\":\"3\",\"big\":\"" + "eccbc87e4b5ce2fe28308fd9f2a7baf3".repeat(200) + "\"}");
    assertThat(payload(fill).path("unchanged").toString()).isEqualTo("[\"n\"]");
    assertThat(ops(events, "r")).hasSize(19);
    assertThat(replay(events)).isEqualTo(tableState("SELECT id, n, big FROM toasty", "id"));
  }

  void run(String statement) {
    try (Connection wc = db.connection(); Statement st = wc.createStatement()) {
      st.execute(statement);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void aRestartFromStoredProgressRepeatsAtMostOneChunk() throws Exception {
    sql("CREATE TABLE rs (id int PRIMARY KEY, v text)",
        "INSERT INTO rs SELECT g, 'v' || g FROM generate_series(1, 1000) g");
    SnapshotTable t = table("rs");
    SnapshotDriver d = driver(t);
    ChunkedSnapshot first = snapshot(t, 100);
    d.pauseAfterHws = 4; // the 4th chunk's rows are pushed but its commit is lost: progress stays at chunk 3
    d.start(first);
    first.start();
    await().atMost(Duration.ofSeconds(60)).until(() -> d.progress().size() == 4);
    JsonNode committed = d.progress().get(2);
    assertThat(committed.path("last").toString()).isEqualTo("[\"300\"]");
    assertThat(committed.path("max").toString()).isEqualTo("[\"1000\"]");
    Thread.sleep(300); // let the first snapshot write the next chunk's watermarks: they must be ignored
    first.close();
    ChunkedSnapshot second = snapshot(t, 100);
    second.restore(committed);
    d.hook.set(second);
    d.pauseAfterHws = Integer.MAX_VALUE;
    second.start();
    awaitDone(second);
    d.drain();

    List<String> keys = d.events().stream().map(SourceEvent::partition).toList();
    assertThat(new HashSet<>(keys)).hasSize(1000);
    Map<String, Integer> counts = new HashMap<>();
    keys.forEach(k -> counts.merge(k, 1, Integer::sum));
    List<String> repeated = counts.entrySet().stream().filter(e -> e.getValue() > 1).map(Map.Entry::getKey)
        .sorted().toList();
    assertThat(repeated).hasSize(100).allSatisfy(k -> assertThat(Integer.parseInt(k)).isBetween(301, 400));
    assertThat(counts.values()).allSatisfy(n -> assertThat(n).isLessThanOrEqualTo(2));
  }

  @Test
  void compositeKeysAreReadInKeyOrderOnceEach() throws Exception {
    sql("CREATE TABLE comp (a int, b text, v int, PRIMARY KEY (a, b))",
        "INSERT INTO comp SELECT a, b, a FROM generate_series(1, 10) a,"
            + " unnest(ARRAY['x|y', 'a\\b', 'plain', 'Z', '']) b");
    SnapshotTable t = table("comp");
    SnapshotDriver d = driver(t);
    ChunkedSnapshot s = snapshot(t, 7, onceAtFirstChunk("UPDATE comp SET v = 99 WHERE a = 1 AND b = 'Z'"));
    d.start(s);
    s.start();
    awaitDone(s);
    d.drain();

    List<SourceEvent> events = d.events();
    List<String> expected = new ArrayList<>();
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT a, b FROM comp ORDER BY a, b")) {
      while (rs.next()) {
        if (!(rs.getInt(1) == 1 && rs.getString(2).equals("Z"))) {
          expected.add(rs.getString(1) + "|" + rs.getString(2));
        }
      }
    }
    assertThat(ops(events, "r").stream().map(SourceEvent::partition).toList()).isEqualTo(expected);
    assertThat(ops(events, "u")).singleElement().satisfies(e -> assertThat(e.partition()).isEqualTo("1|Z"));
    assertThat(replay(events)).isEqualTo(tableState("SELECT a, b, v FROM comp", "a", "b"));
  }

  @Test
  void aSchemaChangeInsideTheWindowRepeatsTheChunk() throws Exception {
    sql("CREATE TABLE shape (id int PRIMARY KEY, v int)",
        "INSERT INTO shape SELECT g, g FROM generate_series(1, 10) g");
    SnapshotTable t = table("shape");
    SnapshotDriver d = driver(t);
    sql("UPDATE shape SET v = 0 WHERE id = 1"); // the stream knows the old shape
    ChunkedSnapshot s = snapshot(t, 50, onceAtFirstChunk("ALTER TABLE shape ADD COLUMN extra int DEFAULT 7",
        "UPDATE shape SET v = 20 WHERE id = 2"));
    d.start(s);
    s.start();
    awaitDone(s);
    d.drain();

    List<SourceEvent> reads = ops(d.events(), "r");
    assertThat(d.markers()).isEqualTo(4); // the chunk's window, discarded, and the chunk read again
    assertThat(reads).hasSize(10);
    assertThat(reads).allSatisfy(e -> assertThat(payload(e).path("after").path("extra").asText()).isEqualTo("7"));
    assertThat(replay(d.events())).isEqualTo(tableState("SELECT id, v, extra FROM shape", "id"));
  }

  @Test
  void tablesAreCopiedInDocumentOrderAndProgressNamesTheTable() throws Exception {
    sql("CREATE TABLE second_t (id int PRIMARY KEY, v text)", "CREATE TABLE nothing_t (id int PRIMARY KEY)",
        "CREATE TABLE first_t (code text PRIMARY KEY)",
        "INSERT INTO second_t SELECT g, 'v' FROM generate_series(1, 25) g",
        "INSERT INTO first_t SELECT 'c' || g FROM generate_series(1, 12) g");
    SnapshotTable first = table("first_t");
    SnapshotTable empty = table("nothing_t");
    SnapshotTable second = table("second_t");
    Connection dc = db.connection();
    toClose.add(dc);
    SnapshotDriver d = new SnapshotDriver(dc, first, empty, second);
    toClose.add(d);
    ChunkedSnapshot s = new ChunkedSnapshot(List.of(first, empty, second), 10, db::connection, Values::apply,
        new SnapshotDriver.TestEvents(), rowsCounted::addAndGet, r -> new Thread(r, "queen-test-snapshot"));
    toClose.add(s);
    d.start(s);
    s.start();
    awaitDone(s);
    d.drain();
    List<String> tables = d.events().stream().map(e -> payload(e).path("table").asText()).distinct().toList();
    assertThat(tables).containsExactly("public.first_t", "public.second_t");
    assertThat(d.events()).hasSize(37);
    assertThat(d.progress().get(0).toString())
        .isEqualTo("{\"table\":0,\"name\":\"public.first_t\",\"last\":[\"c7\"],\"max\":[\"c9\"],\"done\":false}");
    assertThat(d.progress().get(d.progress().size() - 1).path("done").asBoolean()).isTrue();

    // a stored progress that names another table than the document at that place is refused
    ChunkedSnapshot other = new ChunkedSnapshot(List.of(second, first), 10, db::connection, Values::apply,
        new SnapshotDriver.TestEvents(), n -> {}, r -> new Thread(r, "queen-test-snapshot"));
    toClose.add(other);
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> other.restore(d.progress().get(0)))
        .isInstanceOf(ChunkedSnapshot.TablesChanged.class)
        .hasMessage("the source's snapshot was copying table #1 (public.first_t) and the document now lists 2 table(s)"
            + " with another one in that place");
    // a table added at the end while the copy runs is copied when the copy gets there; once the copy is done, a
    // table added anywhere is not copied (streamed from then on; a resync copies it)
    ChunkedSnapshot longer = new ChunkedSnapshot(List.of(first, empty, second, table("later_t")), 10, db::connection,
        Values::apply, new SnapshotDriver.TestEvents(), n -> {}, r -> new Thread(r, "queen-test-snapshot"));
    toClose.add(longer);
    longer.restore(d.progress().get(0));
    assertThat(longer.done()).isFalse();
    assertThat(longer.progress().path("name").asText()).isEqualTo("public.first_t");
    ChunkedSnapshot added = new ChunkedSnapshot(List.of(table("later_t"), first, empty, second), 10, db::connection,
        Values::apply, new SnapshotDriver.TestEvents(), n -> {}, r -> new Thread(r, "queen-test-snapshot"));
    toClose.add(added);
    added.restore(d.progress().get(d.progress().size() - 1));
    assertThat(added.done()).isTrue();
  }

  @Test
  void aNullProgressStartsCleanAndAnEmptyTableIsDoneAtOnce() throws Exception {
    sql("CREATE TABLE empty_t (id int PRIMARY KEY)");
    SnapshotTable t = table("empty_t");
    SnapshotDriver d = driver(t);
    ChunkedSnapshot s = snapshot(t, 10);
    s.restore(null);
    assertThat(s.done()).isFalse();
    assertThat(s.progress().toString())
        .isEqualTo("{\"table\":0,\"name\":\"public.empty_t\",\"last\":null,\"max\":null,\"done\":false}");
    d.start(s);
    s.start();
    awaitDone(s);
    d.drain();
    assertThat(d.events()).isEmpty();
    assertThat(d.markers()).isZero();
  }
}
