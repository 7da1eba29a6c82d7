package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.http.HttpOptions;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.HttpCalls;
import io.queen.testkit.HttpCalls.Answer;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The curl flows of the queen-pgconn README's "Try it over HTTP", as written, over HTTP ({@code java.net.http}) against a node started with
 * {@code http(...)}: the source's "Try it" (snapshot rows, then an update and an insert+delete transaction, then a
 * cdc sink copying them), the invoices sink fed by {@code POST /api/v1/push}, and the connector routes' refusals.
 * The documents are the README's with the test server's host, port, database and credentials in place of "pg".
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HttpTryItFlowsTest {
  static final String KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  Queen queen;
  TestDatabase db;
  HttpCalls http;

  @BeforeEach
  void start(TestDatabase db) {
    this.db = db;
    queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).http(HttpOptions.port(0)).start();
    http = new HttpCalls(EmbeddedQueen.httpAddress(queen).orElseThrow());
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  String connection() {
    return """
        "connection": {"host": "%s", "port": %d, "database": "%s", "user": "%s", "password": "%s", "sslMode": "disable"}"""
        .formatted(db.host(), db.port(), db.name(), db.user(), db.password());
  }

  void sql(String... statements) throws Exception {
    new SourceFixture(db).sql(statements);
  }

  List<String> rows(String query) throws Exception {
    return new SourceFixture(db).rows(query);
  }

  List<JsonNode> pop(String url, int n) {
    List<JsonNode> out = new ArrayList<>();
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100)).until(() -> {
      Answer a = http.get(url);
      assertThat(a.status()).as(a.toString()).isEqualTo(200);
      a.json().get("messages").forEach(out::add);
      return out.size() >= n;
    });
    return out;
  }

  static JsonNode byPartition(List<JsonNode> msgs, String p) {
    return msgs.stream().filter(m -> m.get("partition").asText().equals(p)).findFirst().orElseThrow();
  }

  @Test
  void theSourcesTryItAndTheCdcSink() throws Exception {
    sql("""
        CREATE TABLE orders (
          id         bigint PRIMARY KEY,
          customer   jsonb NOT NULL,
          status     text NOT NULL,
          total      numeric(12,2) NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now()
        )""", """
        INSERT INTO orders (id, customer, status, total) VALUES
          (1, '{"name": "Ada", "tier": "gold"}', 'new', 42.00),
          (2, '{"name": "Linus", "tier": "silver"}', 'new', 17.50)""");

    // curl -s -X PUT localhost:6632/api/v1/connectors/orders-src -H 'content-type: application/json' -d '{...}'
    Answer put = http.put("/api/v1/connectors/orders-src", """
        {
          "kind": "source",
          %s,
          "source": {"tables": [{"table": "public.orders", "queue": "orders"}]}
        }""".formatted(connection()));
    assertThat(put.status()).as(put.toString()).isEqualTo(200);
    assertThat(put.json().get("connection").has("password")).isFalse(); // never echoed

    // curl -s localhost:6632/api/v1/connectors/orders-src | jq -c '.status | {phase, pointerLsn, messages}'
    await().atMost(Duration.ofSeconds(40)).pollInterval(Duration.ofMillis(200)).until(() -> {
      JsonNode st = http.get("/api/v1/connectors/orders-src").json().get("status");
      return st != null && st.get("phase").asText().equals("streaming") && st.get("messages").asLong() == 2
          && !st.get("pointerLsn").isNull();
    });
    JsonNode doc = http.get("/api/v1/connectors/orders-src").json();
    assertThat(doc.get("connection").has("password")).isFalse();
    assertThat(doc.get("kind").asText()).isEqualTo("source");

    // curl -s 'localhost:6632/api/v1/pop/queue/orders?batch=10&partitions=10&consumerGroup=reader&subscriptionMode=all&autoAck=true'
    List<JsonNode> snapshot = pop("/api/v1/pop/queue/orders?batch=10&partitions=10&consumerGroup=reader"
        + "&subscriptionMode=all&autoAck=true", 2);
    assertThat(snapshot).extracting(m -> m.get("partition").asText()).containsExactlyInAnyOrder("1", "2");
    JsonNode ada = byPartition(snapshot, "1").get("data");
    assertThat(ada.get("op").asText()).isEqualTo("r");
    assertThat(ada.get("table").asText()).isEqualTo("public.orders");
    assertThat(ada.get("key").toString()).isEqualTo("{\"id\":1}");
    assertThat(ada.get("after").get("customer").get("name").asText()).isEqualTo("Ada");

    sql("UPDATE orders SET status = 'paid' WHERE id = 1",
        "BEGIN; INSERT INTO orders (id, customer, status, total) VALUES (3, '{\"name\": \"Grace\", \"tier\": \"gold\"}',"
            + " 'new', 99.90); DELETE FROM orders WHERE id = 2; COMMIT");
    // curl -s 'localhost:6632/api/v1/pop/queue/orders?batch=10&partitions=10&consumerGroup=reader&autoAck=true'
    List<JsonNode> changes = pop("/api/v1/pop/queue/orders?batch=10&partitions=10&consumerGroup=reader&autoAck=true",
        3);
    JsonNode u = byPartition(changes, "1");
    JsonNode d = byPartition(changes, "2");
    JsonNode c = byPartition(changes, "3");
    assertThat(u.get("data").get("op").asText()).isEqualTo("u");
    assertThat(d.get("data").get("op").asText()).isEqualTo("d");
    assertThat(c.get("data").get("op").asText()).isEqualTo("c");
    assertThat(c.get("data").get("lsn")).isEqualTo(d.get("data").get("lsn"));
    assertThat(c.get("data").get("xid")).isEqualTo(d.get("data").get("xid"));
    assertThat(c.get("transactionId").asText()).matches("pg:[0-9a-f]{8}:[0-9A-F]{16}:0");
    assertThat(d.get("transactionId").asText()).isEqualTo(c.get("transactionId").asText().replaceAll(":0$", ":1"));

    // the cdc sink: CREATE TABLE orders_copy (LIKE orders INCLUDING ALL); curl -s -X PUT .../connectors/orders-copy
    sql("CREATE TABLE orders_copy (LIKE orders INCLUDING ALL)");
    Answer sink = http.put("/api/v1/connectors/orders-copy", """
        {
          "kind": "sink",
          %s,
          "sink": {"queue": "orders", "table": "public.orders_copy", "mode": "cdc"}
        }""".formatted(connection()));
    assertThat(sink.status()).as(sink.toString()).isEqualTo(200);
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("SELECT id, customer, status, total FROM orders_copy"
            + " ORDER BY id"),
        r -> r.equals(List.of("1 | {\"name\": \"Ada\", \"tier\": \"gold\"} | paid | 42.00",
            "3 | {\"name\": \"Grace\", \"tier\": \"gold\"} | new | 99.90")));

    // the list with status, and the pg block of /status
    JsonNode list = http.get("/api/v1/connectors").json().get("connectors");
    assertThat(list).extracting(n -> n.get("name").asText()).containsExactlyInAnyOrder("orders-src", "orders-copy");
    assertThat(list).allSatisfy(n -> assertThat(n.get("status").get("phase").asText()).isIn("streaming", "running"));
    assertThat(http.get("/api/v1/status").json().get("pg").get("connectors")).hasSize(2);
    assertThat(http.get("/health/ready").status()).isEqualTo(200);

    // pause and resume, then delete: the source's slot goes
    assertThat(http.post("/api/v1/connectors/orders-copy/pause", "").json().get("status").get("phase").asText())
        .isIn("disabled", "running");
    await().atMost(Duration.ofSeconds(10)).until(() -> http.get("/api/v1/connectors/orders-copy").json().get("status")
        .get("phase").asText().equals("disabled"));
    assertThat(http.post("/api/v1/connectors/orders-copy/resume", "").status()).isEqualTo(200);
    assertThat(http.delete("/api/v1/connectors/orders-src").status()).isEqualTo(200);
    assertThat(http.delete("/api/v1/connectors/orders-src").status()).isEqualTo(404);
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("select slot_name from pg_replication_slots"
        + " where database = current_database()"), List::isEmpty);
  }

  @Test
  void theInvoicesSinkFedByPush() throws Exception {
    sql("""
        CREATE TABLE invoices (
          id            bigint PRIMARY KEY,
          customer      jsonb,
          lines         jsonb,
          total         numeric(12,2),
          customer_tier text GENERATED ALWAYS AS (customer->>'tier') STORED,
          city          text GENERATED ALWAYS AS (customer->'address'->>'city') STORED,
          queen_offset  bigint
        )""");
    Answer put = http.put("/api/v1/connectors/invoices-sink", """
        {
          "kind": "sink",
          %s,
          "sink": {"queue": "invoices", "table": "public.invoices", "mode": "upsert", "metadata": {"offset": "queen_offset"}}
        }""".formatted(connection()));
    assertThat(put.status()).as(put.toString()).isEqualTo(200);
    Answer push = http.post("/api/v1/push", """
        {"items":[
          {"queue":"invoices","partition":"7","payload":{"id":7,"customer":{"name":"Ada","tier":"gold","address":{"city":"Turin"}},"lines":[{"sku":"A1","qty":2}],"total":"12.50","note":"no column, ignored"}},
          {"queue":"invoices","partition":"7","payload":{"id":7,"total":15}}
        ]}""");
    assertThat(push.status()).isEqualTo(201);
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("SELECT id, customer, lines, total, customer_tier, city,"
        + " queen_offset FROM invoices"), r -> r.equals(List.of("7 | {\"name\": \"Ada\", \"tier\": \"gold\", \"address\":"
        + " {\"city\": \"Turin\"}} | [{\"qty\": 2, \"sku\": \"A1\"}] | 15.00 | gold | Turin | 1")));
  }

  @Test
  void aConnectorDocumentIsRefusedAsConnectorsPutRefusesIt() {
    Answer bad = http.put("/api/v1/connectors/bad-one", """
        {"kind": "sink", "sink": {"queue": "q", "table": "public.t", "mode": "upsert", "workers": 0}}""");
    assertThat(bad.status()).isEqualTo(400);
    assertThat(bad.json().get("code").asText()).isEqualTo("invalid_connector");
    assertThat(bad.json().get("field").asText()).isEqualTo("sink.workers");
    Answer badName = http.put("/api/v1/connectors/Bad_Name", """
        {"kind": "sink", "sink": {"queue": "q", "table": "public.t", "mode": "upsert"}}""");
    assertThat(badName.status()).isEqualTo(400);
    Answer secret = http.put("/api/v1/connectors/leaky", """
        {"kind": "sink", "connection": {"host": "h", "database": "d", "user": "u", "password": "hunter2-secret"},
         "sink": {"queue": "q", "table": "public.t", "mode": "upsert", "colour": "red"}}""");
    assertThat(secret.status()).isEqualTo(400);
    assertThat(secret.body()).doesNotContain("hunter2-secret");
    assertThat(http.get("/api/v1/connectors").json().get("connectors")).extracting(n -> n.get("name").asText())
        .doesNotContain("bad-one", "Bad_Name", "leaky");
    // a password on a node without an encryption key: the connector's own code, and nothing stored
    try (Queen keyless = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey(null)
        .connectors(ConnectorOptions.defaults().run(false))
        .http(HttpOptions.port(0)).start()) {
      Answer refused = new HttpCalls(EmbeddedQueen.httpAddress(keyless).orElseThrow()).put("/api/v1/connectors/keyless",
          """
          {"kind": "sink", "connection": {"host": "h", "database": "d", "user": "u", "password": "hunter2-secret"},
           "sink": {"queue": "q", "table": "public.t", "mode": "upsert"}}""");
      assertThat(refused.status()).as(refused.toString()).isEqualTo(409);
      assertThat(refused.json().get("code").asText()).isEqualTo("no_encryption_key");
      assertThat(refused.body()).doesNotContain("hunter2-secret");
    }
    assertThat(http.get("/api/v1/connectors/keyless").status()).isEqualTo(404);
    assertThat(http.get("/api/v1/connectors/bad-one").status()).isEqualTo(404);
  }

  @Test
  void aConnectorInErrorMakesTheNodeNotReady() {
    Answer put = http.put("/api/v1/connectors/no-table", """
        {"kind": "sink", "sink": {"queue": "nowhere", "table": "public.no_such_table", "mode": "append"}}""");
    assertThat(put.status()).as(put.toString()).isEqualTo(200);
    await().atMost(Duration.ofSeconds(30)).until(() -> http.get("/health/ready").status() == 503);
    JsonNode ready = http.get("/health/ready").json();
    assertThat(ready.get("status").asText()).isEqualTo("not_ready");
    assertThat(ready.get("checks").get("connectorsInError").asInt()).isPositive();
    assertThat(ready.get("checks").get("database").asBoolean()).isTrue();
    JsonNode st = http.get("/api/v1/connectors/no-table").json().get("status");
    assertThat(st.get("phase").asText()).isEqualTo("error");
    assertThat(st.get("errorCode").asText()).isNotEmpty();
    assertThat(http.get("/health/live").status()).isEqualTo(200);
    assertThat(http.delete("/api/v1/connectors/no-table").status()).isEqualTo(200);
    await().atMost(Duration.ofSeconds(30)).until(() -> http.get("/health/ready").status() == 200);
  }
}
