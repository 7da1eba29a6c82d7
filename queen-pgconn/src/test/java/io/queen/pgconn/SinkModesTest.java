package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SinkModesTest {
  static final ObjectMapper M = new ObjectMapper();
  Queen queen;
  TestDatabase db;

  @BeforeEach
  void start(TestDatabase db) {
    this.db = db;
    queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey(RegistryTest.KEY)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  void sql(String s) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute(s);
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

  /** The README's invoices example, verbatim, against another database on the same server. */
  @Test
  void theSeedsInvoicesExample() throws Exception {
    try (TestDatabase other = db.server().createDatabase("invoices")) {
      try (Connection c = other.connection(); Statement st = c.createStatement()) {
        st.execute("""
            CREATE TABLE invoices (
              id            bigint PRIMARY KEY,
              customer      jsonb,
              lines         jsonb,
              total         numeric(12,2),
              customer_tier text GENERATED ALWAYS AS (customer->>'tier') STORED,
              city          text GENERATED ALWAYS AS (customer->'address'->>'city') STORED,
              queen_offset  bigint
            )""");
      }
      queen.connectors().put("invoices-sink", """
          {
            "kind": "sink",
            "connection": {"host": "%s", "port": %d, "database": "%s", "user": "%s", "password": "%s", "sslMode": "disable"},
            "sink": {"queue": "invoices", "table": "public.invoices", "mode": "upsert", "metadata": {"offset": "queen_offset"}}
          }""".formatted(other.host(), other.port(), other.name(), other.user(), other.password()));
      queen.push(List.of(
          PushItem.to("invoices", "7", M.readTree("""
              {"id":7,"customer":{"name":"Ada","tier":"gold","address":{"city":"Turin"}},"lines":[{"sku":"A1","qty":2}],"total":"12.50","note":"no column, ignored"}""")),
          PushItem.to("invoices", "7", M.readTree("{\"id\":7,\"total\":15}"))));
      await().atMost(20, TimeUnit.SECONDS).untilAsserted(() -> {
        try (Connection c = other.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
            "SELECT id, customer, lines, total, customer_tier, city, queen_offset FROM invoices")) {
          assertThat(rs.next()).isTrue();
          assertThat(rs.getLong(1)).isEqualTo(7);
          assertThat(rs.getString(2)).isEqualTo("{\"name\": \"Ada\", \"tier\": \"gold\", \"address\": {\"city\": \"Turin\"}}");
          assertThat(rs.getString(3)).isEqualTo("[{\"qty\": 2, \"sku\": \"A1\"}]");
          assertThat(rs.getString(4)).isEqualTo("15.00");
          assertThat(rs.getString(5)).isEqualTo("gold");
          assertThat(rs.getString(6)).isEqualTo("Turin");
          assertThat(rs.getLong(7)).isEqualTo(1);
          assertThat(rs.next()).isFalse();
        }
      });
      assertThat(queen.connectors().status("invoices-sink")).get().satisfies(s -> {
        assertThat(s.phase()).isEqualTo("running");
        assertThat(s.counters()).containsEntry("applied", 2L).containsEntry("dlq", 0L);
      });
      queen.connectors().delete("invoices-sink"); // closes its connections before the database is dropped
    }
  }

  /** The README's payments example: a statement that is not idempotent runs exactly once per message. */
  @Test
  void theSeedsPaymentsExampleInSqlMode() throws Exception {
    sql("CREATE TABLE accounts (id bigint PRIMARY KEY, balance numeric NOT NULL)");
    sql("INSERT INTO accounts VALUES (1, 0), (2, 100)");
    queen.connectors().put("payments", """
        {
          "kind": "sink",
          "sink": {
            "queue": "payments",
            "table": "public.accounts",
            "mode": "sql",
            "statement": "UPDATE accounts SET balance = balance + $1::numeric WHERE id = $2::bigint",
            "params": ["$.amount", "$.accountId"]
          }
        }""");
    List<PushItem> items = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      items.add(PushItem.to("payments", "acct-" + (i % 2 + 1), Map.of("amount", "1.25", "accountId", i % 2 + 1)));
    }
    queen.push(items);
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(rows("select id, balance from accounts order by id")).containsExactly("1 | 31.25", "2 | 131.25"));
    // a redelivery (the group's cursor moved back) is recognised by the progress table and changes nothing
    queen.connectors().delete("payments");
    queen.queue("payments").group("pg-payments").seekToBeginning();
    queen.connectors().put("payments", queen.connectors().get("payments").map(Object::toString).orElse("""
        {"kind": "sink", "sink": {"queue": "payments", "table": "public.accounts", "mode": "sql",
         "statement": "UPDATE accounts SET balance = balance + $1::numeric WHERE id = $2::bigint",
         "params": ["$.amount", "$.accountId"]}}"""));
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(queen.connectors().status("payments")).get().satisfies(s ->
            assertThat(s.counters()).containsEntry("skipped", 50L)));
    assertThat(rows("select id, balance from accounts order by id")).containsExactly("1 | 31.25", "2 | 131.25");
  }

  /** A worker keeps its connection to another database across batches, and its cached statements stay usable. */
  @Test
  void aWorkersOwnConnectionServesBatchAfterBatchWithoutErrors() throws Exception {
    sql("CREATE TABLE counts (id bigint PRIMARY KEY, n bigint NOT NULL)");
    sql("INSERT INTO counts VALUES (1, 0)");
    queen.connectors().put("counter", """
        {"kind": "sink",
         "connection": {"host": "%s", "port": %d, "database": "%s", "user": "%s", "password": "%s"},
         "sink": {"queue": "counter", "mode": "sql", "statement": "UPDATE counts SET n = n + $1::bigint WHERE id = 1",
                  "params": ["$.n"]}}""".formatted(db.host(), db.port(), db.name(), db.user(), db.password()));
    for (int round = 1; round <= 5; round++) {
      queen.queue("counter").partition("p").push(Map.of("n", round));
      long want = round * (round + 1) / 2;
      await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows("select n from counts")).containsExactly(Long.toString(want)));
    }
    assertThat(queen.connectors().status("counter")).get().satisfies(s -> {
      assertThat(s.counters()).containsEntry("batches", 5L).containsEntry("errors", 0L).containsEntry("applied", 5L);
      assertThat(s.errorCode()).isNull();
    });
  }

  /**
   * One batch that touches keys several times, as one statement per column shape: every key ends as applying
   * the messages one after the other leaves it (the last row per key, a column a later message does not name
   * kept), and rows whose unique key has a NULL are each inserted (NULLs are distinct for the index).
   */
  @Test
  void anUpsertBatchThatTouchesKeysSeveralTimesEndsAsAppliedInOrder() throws Exception {
    sql("CREATE TABLE tiers (id bigint, region text, tier text, n int DEFAULT 7, UNIQUE (id, region))");
    List<PushItem> items = new ArrayList<>();
    for (int round = 0; round < 3; round++) {
      for (int id = 1; id <= 4; id++) {
        items.add(PushItem.to("tiers", "p" + (id % 2), Map.of("id", id, "region", "eu", "tier", "t" + round)));
      }
    }
    items.add(PushItem.to("tiers", "p1", Map.of("id", 1, "region", "eu", "n", 1))); // another shape: tier stays
    items.add(PushItem.to("tiers", "p0", Map.of("id", 2, "region", "eu", "tier", "last", "n", 2)));
    items.add(PushItem.to("tiers", "p0", Map.of("id", 9, "tier", "no region a")));
    items.add(PushItem.to("tiers", "p0", Map.of("id", 9, "tier", "no region b")));
    queen.push(items); // all there before the sink starts: its first batch holds every message
    queen.connectors().put("tiers", """
        {"kind": "sink", "sink": {"queue": "tiers", "table": "tiers", "mode": "upsert"}}""");
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(queen.connectors().status("tiers").orElseThrow().counters()).containsEntry("applied", 16L));
    assertThat(rows("select id, region, tier, n from tiers order by id, tier")).containsExactly(
        "1 | eu | t2 | 1", "2 | eu | last | 2", "3 | eu | t2 | 7", "4 | eu | t2 | 7",
        "9 | null | no region a | 7", "9 | null | no region b | 7");
    assertThat(queen.connectors().status("tiers").orElseThrow().counters()).containsEntry("batches", 1L)
        .containsEntry("errors", 0L).containsEntry("dlq", 0L);
  }

  /**
   * The sink reduces an upsert batch to the last row per key by the keys' JSON text: {@code 5} and {@code "5"}
   * differ there but are one key to PostgreSQL. The batch's statement then meets that key twice (21000) and the
   * batch is applied message by message: the later row wins, nothing is dead-lettered or counted as an error.
   */
  @Test
  void keysWrittenDifferentlyButReadAsOneEndAsAppliedInOrder() throws Exception {
    sql("CREATE TABLE spelled (id bigint PRIMARY KEY, tier text)");
    queen.push(List.of(PushItem.to("spelled", "p", Map.of("id", 5, "tier", "first")),
        PushItem.to("spelled", "p", Map.of("id", "5", "tier", "second")),
        PushItem.to("spelled", "p", Map.of("id", 6, "tier", "other"))));
    queen.connectors().put("spelled", """
        {"kind": "sink", "sink": {"queue": "spelled", "table": "spelled", "mode": "upsert"}}""");
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(queen.connectors().status("spelled").orElseThrow().counters()).containsEntry("applied", 3L));
    assertThat(rows("select id, tier from spelled order by id")).containsExactly("5 | second", "6 | other");
    assertThat(queen.connectors().status("spelled").orElseThrow().counters()).containsEntry("batches", 1L)
        .containsEntry("errors", 0L).containsEntry("dlq", 0L);
  }

  /**
   * A batch reads its partitions' progress rows before it writes. Messages that follow them are applied (in one
   * statement); messages a batch applied before without their acknowledgement reaching Queen (the row is ahead)
   * are skipped; when the row is behind (messages the sink never read, as when retention removed them) every
   * message is applied. Each case once, then the batches after it: nothing twice, nothing lost.
   */
  @Test
  void theProgressRowsDecideWhatABatchApplies() throws Exception {
    sql("CREATE TABLE steps (id bigint PRIMARY KEY, n int)");
    List<PushItem> items = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      items.add(PushItem.to("steps", "ahead", Map.of("id", i, "n", i)));
      items.add(PushItem.to("steps", "behind", Map.of("id", 100 + i, "n", i)));
    }
    queen.push(items);
    sql("CREATE SCHEMA IF NOT EXISTS queen");
    sql("CREATE TABLE IF NOT EXISTS queen.sink_progress (sink text NOT NULL, partition_id bigint NOT NULL, partition"
        + " text NOT NULL, last_offset bigint NOT NULL, tried_offset bigint, tries int NOT NULL DEFAULT 0,"
        + " updated_at timestamptz NOT NULL DEFAULT now(),"
        + " PRIMARY KEY (sink, partition_id))"); // as the module README documents it
    sql("INSERT INTO queen.sink_progress (sink, partition_id, partition, last_offset) SELECT 'steps', p.id, p.name,"
        + " CASE p.name WHEN 'ahead' THEN 4 ELSE -7 END FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id"
        + " WHERE q.name = 'steps'");
    queen.connectors().put("steps", """
        {"kind": "sink", "sink": {"queue": "steps", "table": "steps", "mode": "upsert", "batchSize": 5}}""");
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(queen.connectors().status("steps").orElseThrow().counters()).containsEntry("applied", 15L)
            .containsEntry("skipped", 5L));
    assertThat(rows("select min(id), max(id), count(*) from steps where id < 100")).containsExactly("5 | 9 | 5");
    assertThat(rows("select min(id), max(id), count(*) from steps where id >= 100")).containsExactly("100 | 109 | 10");
    // the batches after those follow their progress rows
    items.clear();
    for (int i = 10; i < 20; i++) {
      items.add(PushItem.to("steps", "ahead", Map.of("id", i, "n", i)));
      items.add(PushItem.to("steps", "behind", Map.of("id", 100 + i, "n", i)));
    }
    queen.push(items);
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(queen.connectors().status("steps").orElseThrow().counters()).containsEntry("applied", 35L));
    assertThat(queen.connectors().status("steps").orElseThrow().counters()).containsEntry("skipped", 5L)
        .containsEntry("errors", 0L).containsEntry("dlq", 0L);
    assertThat(rows("select count(*), sum(n) from steps")).containsExactly("35 | 370"); // n: 5..19 and 0..19
    assertThat(rows("select partition, last_offset from queen.sink_progress where sink = 'steps' order by partition"))
        .containsExactly("ahead | 19", "behind | 19");
  }

  @Test
  void appendModeWritesEveryMessageAndDefaultsTheRest() throws Exception {
    sql("CREATE TABLE events (seq bigserial PRIMARY KEY, kind text NOT NULL, at text DEFAULT 'now', body jsonb, q_part text)");
    queen.connectors().put("events", """
        {"kind": "sink", "sink": {"queue": "events", "table": "events", "mode": "append",
         "metadata": {"partition": "q_part", "payload": "body"}}}""");
    for (int i = 0; i < 5; i++) {
      queen.queue("events").partition("p" + (i % 2)).push(Map.of("kind", "k" + i));
    }
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(rows("select kind, at, body->>'kind', q_part from events order by kind")).containsExactly(
            "k0 | now | k0 | p0", "k1 | now | k1 | p1", "k2 | now | k2 | p0", "k3 | now | k3 | p1", "k4 | now | k4 | p0"));
  }

  /**
   * A batch's target transaction bounds how long it may sit idle holding its progress rows' locks (a worker paused
   * mid-batch): the setting is in force while the batch writes, for that transaction only.
   */
  @Test
  void aBatchsTransactionMaySitIdleFifteenSecondsAtMost() throws Exception {
    // an AFTER trigger fires once the statement is done: what the transaction then holds, as it would sit idle
    sql("CREATE TABLE guarded (seq bigserial PRIMARY KEY, kind text NOT NULL, idle text)");
    sql("CREATE TABLE guarded_seen (idle text)");
    sql("CREATE FUNCTION guarded_seen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        + " INSERT INTO guarded_seen VALUES (current_setting('idle_in_transaction_session_timeout')); RETURN NULL; END $$");
    sql("CREATE TRIGGER guarded_seen AFTER INSERT ON guarded FOR EACH ROW EXECUTE FUNCTION guarded_seen()");
    queen.connectors().put("guarded", """
        {"kind": "sink", "sink": {"queue": "guarded", "table": "guarded", "mode": "append"}}""");
    queen.queue("guarded").partition("p").push(Map.of("kind", "k"));
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(rows("select idle from guarded_seen")).containsExactly("15s"));
    assertThat(rows("select kind from guarded")).containsExactly("k");
  }

  @Test
  void cdcModeAppliesTheSourcesEvents() throws Exception {
    sql("CREATE TABLE orders_copy (id bigint PRIMARY KEY, customer jsonb, status text, total numeric(12,2), note text)");
    queen.connectors().put("orders-copy", """
        {"kind": "sink", "sink": {"queue": "orders", "table": "public.orders_copy", "mode": "cdc"}}""");
    String[][] events = {
        {"1", "{\"op\":\"r\",\"table\":\"public.orders\",\"key\":{\"id\":1},\"after\":{\"id\":1,\"customer\":{\"name\":\"Ada\"},\"status\":\"new\",\"total\":42.00,\"note\":\"big\"},\"before\":null}"},
        {"2", "{\"op\":\"r\",\"table\":\"public.orders\",\"key\":{\"id\":2},\"after\":{\"id\":2,\"customer\":{\"name\":\"Linus\"},\"status\":\"new\",\"total\":17.50},\"before\":null}"},
        {"1", "{\"op\":\"u\",\"table\":\"public.orders\",\"key\":{\"id\":1},\"after\":{\"id\":1,\"status\":\"paid\",\"total\":42.00},\"unchanged\":[\"note\"],\"before\":null}"},
        {"3", "{\"op\":\"c\",\"table\":\"public.orders\",\"key\":{\"id\":3},\"after\":{\"id\":3,\"customer\":{\"name\":\"Grace\"},\"status\":\"new\",\"total\":99.90},\"before\":null}"},
        {"2", "{\"op\":\"d\",\"table\":\"public.orders\",\"key\":{\"id\":2},\"after\":null,\"before\":{\"id\":2}}"},
        // a key change: d on the old partition, c on the new one
        {"3", "{\"op\":\"d\",\"table\":\"public.orders\",\"key\":{\"id\":3},\"after\":null,\"before\":{\"id\":3}}"},
        {"4", "{\"op\":\"c\",\"table\":\"public.orders\",\"key\":{\"id\":4},\"after\":{\"id\":4,\"customer\":{\"name\":\"Grace\"},\"status\":\"new\",\"total\":99.90},\"before\":null}"},
    };
    for (String[] e : events) {
      queen.queue("orders").partition(e[0]).push(M.readTree(e[1]));
    }
    await().atMost(20, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(rows("select id, customer, status, total, note from orders_copy order by id")).containsExactly(
            "1 | {\"name\": \"Ada\"} | paid | 42.00 | big", "4 | {\"name\": \"Grace\"} | new | 99.90 | null"));
  }

  @Test
  void aPoisonMessageIsDeadLetteredAfterMaxAttemptsAndItsPartitionGoesOn() throws Exception {
    sql("CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL CHECK (qty > 0))");
    queen.connectors().put("items", """
        {"kind": "sink", "sink": {"queue": "items", "table": "items", "mode": "upsert", "maxAttempts": 2}}""");
    queen.push(List.of(PushItem.to("items", "p", Map.of("id", 1, "qty", 1)),
        PushItem.to("items", "p", Map.of("id", 2, "qty", -5)),
        PushItem.to("items", "p", Map.of("id", 3, "qty", 3))));
    await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(rows("select id, qty from items order by id")).containsExactly("1 | 1", "3 | 3"));
    await().atMost(10, TimeUnit.SECONDS).untilAsserted(() -> assertThat(queen.deadLetters("items").group("pg-items").list(10, null))
        .singleElement().satisfies(d -> assertThat(d.error()).contains("items_qty_check").contains("2 attempt")));
    assertThat(queen.connectors().status("items").orElseThrow().counters()).containsEntry("dlq", 1L);
  }
}
