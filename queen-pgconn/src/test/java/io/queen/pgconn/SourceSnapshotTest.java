package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.ChildJvm;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The source's initial snapshot through the stream runtime: the README's "Try it" flow whole (the two rows already
 * there arrive as {@code r} events in partitions 1 and 2, then the stream's changes, then a cdc sink copies them),
 * and a table copied in small chunks while a writer keeps changing it.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SourceSnapshotTest {
  static final ObjectMapper EXACT = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false);
  Queen queen;
  TestDatabase db;

  @BeforeEach
  void start(TestDatabase db) {
    this.db = db;
    queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  void sql(String... statements) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  List<Message> read(String queue, int n) {
    List<Message> out = new ArrayList<>();
    await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(50)).until(() -> {
      out.addAll(queen.queue(queue).group("reader").subscription(SubscriptionMode.ALL).autoAck(true)
          .batch(100).partitions(100).pop());
      return out.size() >= n;
    });
    return out;
  }

  ConnectorStatus status(String name) {
    return queen.connectors().status(name).orElseThrow();
  }

  @Test
  void theSeedsTryItFlowStartsWithTheTwoRowsAsReadEvents() throws Exception {
    sql("""
        CREATE TABLE orders (
          id         bigint PRIMARY KEY,
          customer   jsonb NOT NULL,
          status     text NOT NULL,
          total      numeric(12,2) NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now()
        )""", """
        INSERT INTO orders (id, customer, status, total, created_at) VALUES
          (1, '{"name": "Ada", "tier": "gold"}', 'new', 42.00, '2026-10-03 06:14:39.365472+00'),
          (2, '{"name": "Linus", "tier": "silver"}', 'new', 17.50, '2026-10-03 06:14:39.365472+00')""");
    queen.connectors().put("orders-src", """
        {"kind": "source", "source": {"tables": [{"table": "public.orders", "queue": "orders"}]}}""");
    List<Message> snapshot = new ArrayList<>(read("orders", 2));
    snapshot.sort(java.util.Comparator.comparing(Message::partition)); // two partitions: no order between them
    await().atMost(Duration.ofSeconds(30)).until(() -> status("orders-src").phase().equals("streaming"));
    assertThat(snapshot).extracting(Message::partition).containsExactly("1", "2");
    JsonNode r1 = snapshot.get(0).payload();
    JsonNode r2 = snapshot.get(1).payload();
    assertThat(r1.get("op").asText()).isEqualTo("r");
    assertThat(r1.get("table").asText()).isEqualTo("public.orders");
    assertThat(r1.get("key")).isEqualTo(EXACT.readTree("{\"id\":1}"));
    assertThat(r1.get("after")).isEqualTo(EXACT.readTree("{\"id\":1,\"customer\":{\"name\":\"Ada\",\"tier\":\"gold\"},"
        + "\"status\":\"new\",\"total\":42.00,\"created_at\":\"2026-10-03T06:14:39.365472+00:00\"}"));
    assertThat(r1.get("after").get("total").toString()).isEqualTo("42.00");
    assertThat(r2.get("after").get("total").toString()).isEqualTo("17.50");
    assertThat(r1.get("before").isNull()).isTrue();
    assertThat(r1.has("xid")).isFalse();
    assertThat(r1.get("seq").asInt()).isZero();
    assertThat(r2.get("seq").asInt()).isEqualTo(1);
    assertThat(r1.get("lsn")).isEqualTo(r2.get("lsn"));
    assertThat(r1.get("ts")).isEqualTo(r2.get("ts"));
    assertThat(r1.get("ts").asText()).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z");
    assertThat(snapshot.get(0).transactionId()).matches("pg:[0-9a-f]{8}:s:\\d+:0");
    assertThat(snapshot.get(1).transactionId()).isEqualTo(snapshot.get(0).transactionId().replaceAll(":0$", ":1"));

    sql("UPDATE orders SET status = 'paid' WHERE id = 1", """
        BEGIN;
        INSERT INTO orders (id, customer, status, total) VALUES (3, '{"name": "Grace", "tier": "gold"}', 'new', 99.90);
        DELETE FROM orders WHERE id = 2;
        COMMIT""");
    List<Message> changed = read("orders", 3);
    assertThat(changed).extracting(m -> m.payload().get("op").asText()).containsExactlyInAnyOrder("u", "d", "c");
    assertThat(changed).extracting(Message::partition).containsExactlyInAnyOrder("1", "2", "3");

    sql("CREATE TABLE orders_copy (LIKE orders INCLUDING ALL)");
    queen.connectors().put("orders-copy", """
        {"kind": "sink", "sink": {"queue": "orders", "table": "public.orders_copy", "mode": "cdc"}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("SELECT id, customer, status, total FROM orders_copy"
        + " ORDER BY id"), r -> r.equals(List.of("1 | {\"name\": \"Ada\", \"tier\": \"gold\"} | paid | 42.00",
            "3 | {\"name\": \"Grace\", \"tier\": \"gold\"} | new | 99.90")));
    assertThat(rows("SELECT obj_description(oid, 'pg_publication') FROM pg_publication"
        + " WHERE pubname = 'queen_orders_src'")).containsExactly("created by Queen source orders-src");
    assertThat(queen.connectors().delete("orders-src")).isTrue();
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("SELECT slot_name FROM pg_replication_slots"
        + " WHERE database = current_database()"), List::isEmpty);
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("SELECT pubname FROM pg_publication"
        + " WHERE pubname = 'queen_orders_src'"), List::isEmpty);
  }

  /**
   * A managed source that names a publication it did not create (here one it refuses, filtered) leaves it when it is
   * deleted: it once dropped the user's publication although it had published nothing.
   */
  /**
   * The phase turns {@code streaming} only with the bundle that copies the last table's last chunk: the snapshot may
   * read that chunk for a bundle still being built while an earlier bundle commits, and the phase (and the "snapshot
   * done" line's count) went by the snapshot's own state then, ahead of what Queen held (a new user saw the line
   * count 3 of 6 rows, three runs of three).
   */
  @Test
  void thePhaseTurnsStreamingWithTheBundleThatHoldsTheLastCopiedRow() throws Exception {
    sql("CREATE TABLE cats2 (id bigint PRIMARY KEY, name text)", "CREATE TABLE dogs2 (id bigint PRIMARY KEY, name text)",
        "INSERT INTO cats2 SELECT g, 'c' || g FROM generate_series(1, 3) g",
        "INSERT INTO dogs2 SELECT g, 'd' || g FROM generate_series(1, 5) g");
    queen.connectors().put("pets2-src", """
        {"kind": "source", "source": {"tables": [{"table": "public.cats2", "queue": "pets2"},
                                                 {"table": "public.dogs2", "queue": "pets2"}]}}""");
    List<Long> seen = new ArrayList<>();
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(5)).until(() -> {
      ConnectorStatus st = status("pets2-src");
      if (!"streaming".equals(st.phase())) {
        return false;
      }
      seen.add(st.counters().get("snapshotRows"));
      return true;
    });
    assertThat(seen).as("snapshotRows when the phase first read streaming").containsExactly(8L);
  }

  @Test
  void deletingASourceKeepsAPublicationItDidNotCreate() throws Exception {
    sql("CREATE TABLE mine (id bigint PRIMARY KEY, v int)", "CREATE PUBLICATION my_pub FOR TABLE mine WHERE (id > 10)");
    queen.connectors().put("mine-src", """
        {"kind": "source", "source": {"publication": "my_pub",
                                      "tables": [{"table": "public.mine", "queue": "mine"}]}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> "publication_filtered".equals(status("mine-src").errorCode()));
    assertThat(queen.connectors().delete("mine-src")).isTrue(); // drops what it drops before it returns
    assertThat(rows("SELECT pubname FROM pg_publication WHERE pubname = 'my_pub'")).containsExactly("my_pub");
  }

  /**
   * A row read by the snapshot and the same row arriving from the stream print alike: the snapshot once read
   * {@code col::text}, which some types cast differently from how their output function (pgoutput's) prints them,
   * so a boolean arrived as the string {@code "true"}, a {@code char(n)} without its blanks (as a key: another
   * partition) and an inet with its {@code /32}.
   */
  @Test
  void aSnapshotRowAndAStreamedRowOfTheSameValuesPrintAlike() throws Exception {
    sql("CREATE TYPE mood AS ENUM ('ok', 'sad')",
        "CREATE DOMAIN flag AS boolean",
        "CREATE TABLE typed (k char(4) PRIMARY KEY, b boolean, ch char(3), c1 \"char\", nm name, ip inet,"
            + " net cidr, f flag, bs boolean[], m mood, vc varchar(5), x xml)",
        "INSERT INTO typed VALUES ('ab', true, 'x', 'q', 'nm', '10.0.0.1', '10.0.0.0/8', false, '{t,f,NULL}', 'ok',"
            + " 'v ', '<a/>')");
    queen.connectors().put("typed-src", """
        {"kind": "source", "source": {"tables": [{"table": "public.typed", "queue": "typed"}]}}""");
    List<Message> first = read("typed", 1);
    await().atMost(Duration.ofSeconds(30)).until(() -> status("typed-src").phase().equals("streaming"));
    sql("INSERT INTO typed VALUES ('cd', true, 'x', 'q', 'nm', '10.0.0.1', '10.0.0.0/8', false, '{t,f,NULL}', 'ok',"
        + " 'v ', '<a/>')");
    List<Message> second = read("typed", 1);
    JsonNode r = first.get(0).payload();
    JsonNode c = second.get(0).payload();
    assertThat(r.get("op").asText()).isEqualTo("r");
    assertThat(c.get("op").asText()).isEqualTo("c");
    assertThat(first.get(0).partition()).isEqualTo("ab  ");
    assertThat(second.get(0).partition()).isEqualTo("cd  ");
    assertThat(r.get("key")).isEqualTo(EXACT.readTree("{\"k\":\"ab  \"}"));
    ObjectNode stream = (ObjectNode) c.get("after").deepCopy();
    stream.put("k", "ab  ");
    assertThat(r.get("after")).as("the snapshot prints every value as the stream does").isEqualTo(stream);
    assertThat(r.get("after").get("b").isBoolean()).isTrue();
    assertThat(r.get("after").get("ch").asText()).isEqualTo("x  ");
    assertThat(r.get("after").get("ip").asText()).isEqualTo("10.0.0.1");
    assertThat(r.get("after").get("f").isBoolean()).isTrue();
  }

  /**
   * The rule: "a table added to a running source is streamed from then on but not copied (resync to copy it)". The
   * source once stopped with setup_failed instead, its snapshot progress naming a table the longer list did not
   * have in that place.
   */
  @Test
  void aTableAddedToARunningSourceIsStreamedFromThenOnAndNotCopied() throws Exception {
    sql("CREATE TABLE first_t (id bigint PRIMARY KEY, v int)", "CREATE TABLE added_t (id bigint PRIMARY KEY, v int)",
        "INSERT INTO first_t VALUES (1, 1), (2, 2)", "INSERT INTO added_t VALUES (1, 1), (2, 2)");
    queen.connectors().put("grow-src", """
        {"kind": "source", "source": {"tables": [{"table": "public.first_t", "queue": "first"}]}}""");
    assertThat(read("first", 2)).extracting(m -> m.payload().get("op").asText()).containsOnly("r");
    await().atMost(Duration.ofSeconds(30)).until(() -> status("grow-src").phase().equals("streaming"));

    queen.connectors().put("grow-src", """
        {"kind": "source", "source": {"tables": [{"table": "public.first_t", "queue": "first"},
                                                 {"table": "public.added_t", "queue": "added"}]}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> status("grow-src").phase().equals("streaming")
        && rows("SELECT count(*) FROM pg_publication_tables WHERE tablename = 'added_t'").equals(List.of("1")));
    sql("INSERT INTO added_t VALUES (3, 3)", "UPDATE first_t SET v = 10 WHERE id = 1");
    List<Message> added = read("added", 1);
    assertThat(added).extracting(m -> m.payload().get("op").asText() + " " + m.partition()).containsExactly("c 3");
    assertThat(read("first", 1)).extracting(m -> m.payload().get("op").asText() + " " + m.partition())
        .containsExactly("u 1");
    assertThat(status("grow-src").phase()).isEqualTo("streaming");
    assertThat(queen.status().queue("added").messages()).as("the rows already there are not copied").isEqualTo(1);
  }

  /**
   * The rule: a table added to a running source is streamed "from then on". A row written the moment the put returns,
   * with the default refresh (5 s) before the owner runs the new document, was lost: the owner added the
   * table to the publication only then, and the decoder reads the publication as it was at each change.
   */
  @Test
  void aRowWrittenTheMomentAPutAddsItsTableIsStreamed() throws Exception {
    queen.close();
    queen = EmbeddedQueen.builder().dataSource(db.dataSource()).start(); // the default ConnectorOptions.refresh
    sql("CREATE TABLE early_t (id bigint PRIMARY KEY, v int)", "CREATE TABLE late_t (id bigint PRIMARY KEY, v int)");
    queen.connectors().put("late-src", """
        {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.early_t", "queue": "early"}]}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> status("late-src").phase().equals("streaming"));
    queen.connectors().put("late-src", """
        {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.early_t", "queue": "early"},
                                                                      {"table": "public.late_t", "queue": "late"}]}}""");
    sql("INSERT INTO late_t VALUES (1, 1)", "INSERT INTO early_t VALUES (1, 1)", "INSERT INTO late_t VALUES (2, 2)");
    assertThat(read("late", 2)).extracting(m -> m.payload().get("op").asText() + " " + m.partition())
        .containsExactlyInAnyOrder("c 1", "c 2");
    assertThat(read("early", 1)).extracting(m -> m.payload().get("op").asText() + " " + m.partition())
        .containsExactly("c 1");
    await().atMost(Duration.ofSeconds(30)).until(() -> status("late-src").phase().equals("streaming"));
    assertThat(queen.status().queue("late").messages()).isEqualTo(2);
  }

  /**
   * A table the document drops stays in a publication the source manages; put back, nothing changes in the source
   * database, so the running stream learns of the new document only by asking. It asked once per relation, and
   * passed the row written right after the put over for good (found in review).
   */
  @Test
  void aTablePutBackWhileStillPublishedStreamsTheRowWrittenAfterThePut() throws Exception {
    queen.close();
    queen = EmbeddedQueen.builder().dataSource(db.dataSource()).start(); // the default ConnectorOptions.refresh
    String both = """
        {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.e_t", "queue": "e"},
                                                                      {"table": "public.l_t", "queue": "l"}]}}""";
    sql("CREATE TABLE e_t (id bigint PRIMARY KEY, v int)", "CREATE TABLE l_t (id bigint PRIMARY KEY, v int)");
    try (LogCapture logs = LogCapture.start()) {
      queen.connectors().put("bk", both);
      await().atMost(Duration.ofSeconds(30)).until(() -> logs.linesWith("source 'bk' streaming from").size() == 1);
      queen.connectors().put("bk", """
          {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.e_t", "queue": "e"}]}}""");
      await().atMost(Duration.ofSeconds(30)).until(() -> logs.linesWith("source 'bk' streaming from").size() == 2);
      sql("INSERT INTO l_t VALUES (1, 1)", "INSERT INTO e_t VALUES (1, 1)"); // l_t not in the document: passed over
      assertThat(read("e", 1)).extracting(Message::partition).containsExactly("1");
      queen.connectors().put("bk", both);
      sql("INSERT INTO l_t VALUES (2, 2)", "INSERT INTO e_t VALUES (2, 2)");
      await().atMost(Duration.ofSeconds(30)).until(() -> logs.linesWith("source 'bk' streaming from").size() == 3);
      sql("INSERT INTO l_t VALUES (3, 3)");
      assertThat(read("l", 2)).extracting(Message::partition).containsExactly("2", "3");
      assertThat(read("e", 1)).extracting(Message::partition).containsExactly("2");
    }
  }

  /**
   * The put adds a table to the publication only when the owner's checks pass: a table without a key, published,
   * makes the application's own updates and deletes of it fail (found in review).
   */
  @Test
  void aPutDoesNotPublishATableTheSetupRefuses() throws Exception {
    sql("CREATE TABLE k_t (id bigint PRIMARY KEY, v int)", "CREATE TABLE nk_t (id bigint, v int)",
        "INSERT INTO nk_t VALUES (1, 1)");
    queen.connectors().put("nk", """
        {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.k_t", "queue": "k"}]}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> status("nk").phase().equals("streaming"));
    queen.connectors().put("nk", """
        {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.k_t", "queue": "k"},
                                                                      {"table": "public.nk_t", "queue": "nk"}]}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> "no_key".equals(status("nk").errorCode()));
    // the table and its replica identity as ALTER TABLE names it, not as the catalog codes it
    assertThat(status("nk").error()).contains("public.nk_t (replica identity default, no primary key)");
    assertThat(rows("SELECT count(*) FROM pg_publication_tables WHERE pubname = 'queen_nk' AND tablename = 'nk_t'"))
        .containsExactly("0");
    sql("UPDATE nk_t SET v = 2 WHERE id = 1"); // the application's own update still works
  }

  /**
   * A table renamed while the source streams: the publication follows the table, and its changes were passed over in
   * silence (the document names the old name). They go on to the table's queue under the new name, with a WARN; a
   * restart under the old name stops with table_missing, and the document put with the new name goes on from there,
   * nothing lost and nothing twice.
   */
  @Test
  void aTableRenamedWhileStreamingLosesNothing() throws Exception {
    sql("CREATE TABLE ren_t (id bigint PRIMARY KEY, v int)");
    String oldDoc = """
        {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.ren_t", "queue": "ren"}]}}""";
    try (LogCapture logs = LogCapture.start()) {
      queen.connectors().put("ren-src", oldDoc);
      await().atMost(Duration.ofSeconds(30)).until(() -> status("ren-src").phase().equals("streaming"));
      sql("INSERT INTO ren_t VALUES (1, 1)");
      assertThat(read("ren", 1)).extracting(m -> m.payload().get("op").asText()).containsExactly("c");

      sql("ALTER TABLE ren_t RENAME TO ren_t2", "INSERT INTO ren_t2 VALUES (2, 2)", "UPDATE ren_t2 SET v = 10 WHERE id = 1");
      List<Message> renamed = read("ren", 2);
      assertThat(renamed).extracting(m -> m.payload().get("op").asText() + " " + m.partition()
          + " " + m.payload().get("table").asText()).containsExactly("c 2 public.ren_t2", "u 1 public.ren_t2");
      assertThat(logs.linesWith("ren-src", "public.ren_t is logged as public.ren_t2")).hasSize(1);
      assertThat(status("ren-src").phase()).isEqualTo("streaming");
    }

    // a restart under the old name (the same document put again changes nothing: paused and resumed)
    queen.connectors().setEnabled("ren-src", false);
    await().atMost(Duration.ofSeconds(30)).until(() -> status("ren-src").phase().equals("disabled"));
    queen.connectors().setEnabled("ren-src", true);
    await().atMost(Duration.ofSeconds(30)).until(() -> "table_missing".equals(status("ren-src").errorCode()));
    sql("INSERT INTO ren_t2 VALUES (3, 3)");
    queen.connectors().put("ren-src", oldDoc.replace("public.ren_t\"", "public.ren_t2\""));
    assertThat(read("ren", 1)).extracting(m -> m.payload().get("op").asText() + " " + m.partition())
        .containsExactly("c 3");
    await().atMost(Duration.ofSeconds(30)).until(() -> status("ren-src").phase().equals("streaming"));
    assertThat(queen.status().queue("ren").messages()).as("nothing pushed twice").isEqualTo(4);
  }

  @Test
  void aTableCopiedInSmallChunksWhileAWriterChangesItEndsAsTheTable() throws Exception {
    sql("CREATE SEQUENCE pver", "CREATE TABLE parts (id int PRIMARY KEY, ver bigint NOT NULL, name text)",
        "INSERT INTO parts SELECT g, nextval('pver'), 'n' || g FROM generate_series(1, 2000) g");
    queen.connectors().put("parts-src", """
        {"kind": "source", "source": {"tables": [{"table": "public.parts", "queue": "parts"}],
         "snapshotChunkRows": 100}}""");
    long until = System.currentTimeMillis() + 60_000;
    int writes = 0;
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      while (System.currentTimeMillis() < until && (writes < 100 || !status("parts-src").phase().equals("streaming"))) {
        int id = 1 + (writes * 37) % 2100;
        switch (writes % 4) {
          case 0, 1 -> st.execute("UPDATE parts SET ver = nextval('pver'), name = 'u' || ver WHERE id = " + id);
          case 2 -> st.execute("DELETE FROM parts WHERE id = " + id);
          default -> st.execute("INSERT INTO parts VALUES (" + id + ", nextval('pver'), 'i') ON CONFLICT DO NOTHING");
        }
        writes++;
        Thread.sleep(2);
      }
    }
    assertThat(status("parts-src").phase()).isEqualTo("streaming");
    Map<String, String> expected = new HashMap<>();
    for (String row : rows("SELECT id, ver, name FROM parts")) {
      expected.put(row.substring(0, row.indexOf(" |")), row);
    }
    Map<String, String> replayed = new HashMap<>();
    Map<String, Long> versions = new HashMap<>();
    await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100)).until(() -> {
      for (Message m : queen.queue("parts").group("replay").subscription(SubscriptionMode.ALL).autoAck(true)
          .batch(500).partitions(500).pop()) {
        JsonNode p = m.payload();
        if (p.get("op").asText().equals("d")) {
          replayed.remove(m.partition());
          continue;
        }
        long ver = p.get("after").get("ver").asLong();
        Long before = versions.put(m.partition(), ver);
        assertThat(before == null || before <= ver).as("row %s: version %s after %s", m.partition(), ver, before)
            .isTrue();
        replayed.put(m.partition(), m.partition() + " | " + ver + " | " + p.get("after").get("name").asText());
      }
      return replayed.equals(expected);
    });
    assertThat(status("parts-src").counters().get("snapshotRows")).isBetween(1L, 2000L);
  }

  @Test
  void anOwnerCrashedMidSnapshotIsTakenOverAndEveryRowArrivesExactlyOnce() throws Exception {
    sql("CREATE TABLE stock (id int PRIMARY KEY, qty int NOT NULL)",
        "INSERT INTO stock SELECT g, g % 17 FROM generate_series(1, 3000) g");
    Duration ttl = Duration.ofSeconds(3);
    queen.close();
    // the owner runs in a JVM of its own, so that it can crash; a node here stands by
    try (ChildJvm a = SourceNodeChild.start(db, "snap-a", ttl); Connection hold = db.connection();
        Statement holdSt = hold.createStatement()) {
      // the table locked until the standby runs: the owner takes the lease and waits in its setup, snapshotting
      // nothing yet
      hold.setAutoCommit(false);
      holdSt.execute("LOCK TABLE stock IN ACCESS EXCLUSIVE MODE");
      try (Queen admin = EmbeddedQueen.builder().dataSource(db.dataSource())
          .connectors(ConnectorOptions.defaults().run(false)).start()) {
        admin.connectors().put("stock-src", """
            {"kind": "source", "source": {"tables": [{"table": "public.stock", "queue": "stock"}],
             "snapshotChunkRows": 200}}""");
      }
      a.awaitLine(l -> l.startsWith("STATUS stock-src ") && l.split(" ")[3].equals("snap-a"), Duration.ofSeconds(30));
      queen = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("snap-b")
          .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)).sourceLeaseTtl(ttl)).start();
      Queen b = queen;
      SourceFixture.awaitPhase(b, "stock-src", "standby", Duration.ofSeconds(10));
      assertThat(readEvents("stock")).isZero();
      hold.commit();
      // the owner copies a few chunks, then dies without giving its lease back
      await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(5)).until(() -> readEvents("stock") >= 600);
      SourceNodeChild.crash(db, a, "snap-a");
      // every row the crashed owner committed, counted in Queen before the standby can have taken over: the lease,
      // renewed every TTL/3, runs for two seconds more at least, and still names the crashed owner below
      long copiedFirst = readEvents("stock");
      assertThat(status("stock-src").leaseNode()).as("counted before the takeover").isEqualTo("snap-a");
      assertThat(copiedFirst).as("killed mid-snapshot").isLessThan(3000);
      await().atMost(Duration.ofSeconds(60)).until(() -> {
        ConnectorStatus st = b.connectors().status("stock-src").orElseThrow();
        return st.phase().equals("streaming") && b.nodeId().equals(st.leaseNode());
      });
      List<Message> all = read("stock", 3000);
      Thread.sleep(500);
      all.addAll(queen.queue("stock").group("reader").subscription(SubscriptionMode.ALL).autoAck(true).batch(100)
          .partitions(100).pop());
      long copiedSecond = status("stock-src").counters().get("snapshotRows");
      assertThat(copiedFirst + copiedSecond).as("the next owner copied only what was left").isEqualTo(3000);
      assertThat(all).hasSize(3000);
      assertThat(all).extracting(Message::partition).doesNotHaveDuplicates();
      assertThat(all).extracting(m -> m.payload().get("op").asText()).containsOnly("r");
      assertThat(all).extracting(Message::transactionId).doesNotHaveDuplicates();
    }
  }

  /** The snapshot's rows in {@code queue} (its {@code r} events), as Queen's tables hold them. */
  long readEvents(String queue) throws Exception {
    try (Connection c = db.connection(); java.sql.PreparedStatement st = c.prepareStatement("SELECT count(*)"
        + " FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q"
        + " ON q.id = p.queue_id WHERE q.name = ? AND m.payload ->> 'op' = 'r'")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  List<String> rows(String q) throws Exception {
    List<String> out = new ArrayList<>();
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(q)) {
      int n = rs.getMetaData().getColumnCount();
      while (rs.next()) {
        List<String> r = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
          r.add(rs.getString(i));
        }
        out.add(String.join(" | ", r));
      }
    }
    return out;
  }
}
