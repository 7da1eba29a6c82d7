package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
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
 * The source's stream against a real walsender: the queen-pgconn README's "Try it" changes (an update, then an insert and a delete
 * in one transaction) give exactly the documented events, partitions and transactionIds, and a cdc sink copies them
 * into a second table.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourceStreamTest {
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
    new SourceFixture(db).sql(statements);
  }

  List<Message> read(int n) {
    List<Message> out = new ArrayList<>();
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50)).until(() -> {
      out.addAll(queen.queue("orders").group("reader").subscription(SubscriptionMode.ALL).autoAck(true)
          .batch(10).partitions(10).pop());
      return out.size() >= n;
    });
    return out;
  }

  ConnectorStatus status(String name) {
    return queen.connectors().status(name).orElseThrow();
  }

  @Test
  void theSeedsChangesArriveAsTheSeedsEventsAndACdcSinkCopiesThem() throws Exception {
    sql("create table orders (id bigint primary key, customer jsonb not null, status text not null,"
        + " total numeric(12,2) not null, created_at timestamptz not null default now())");
    queen.connectors().put("orders-src", """
        {"kind": "source",
         "source": {"tables": [{"table": "public.orders", "queue": "orders"}], "snapshot": "never"}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> status("orders-src").phase().equals("streaming"));
    sql("insert into orders (id, customer, status, total, created_at) values"
        + " (1, '{\"name\": \"Ada\", \"tier\": \"gold\"}', 'new', 42.00, '2026-10-03 06:14:39.365472+00'),"
        + " (2, '{\"name\": \"Linus\", \"tier\": \"silver\"}', 'new', 17.50, '2026-10-03 06:14:39.365472+00')");
    List<Message> inserted = read(2);
    assertThat(inserted).extracting(Message::partition).containsExactlyInAnyOrder("1", "2");
    JsonNode first = inserted.stream().filter(m -> m.partition().equals("1")).findFirst().orElseThrow().payload();
    assertThat(first.get("op").asText()).isEqualTo("c");
    // the documented values exactly (Queen keeps payloads as jsonb, which orders an object's keys its own way)
    assertThat(first.get("after")).isEqualTo(EXACT.readTree("{\"id\":1,\"customer\":{\"name\":\"Ada\",\"tier\":\"gold\"},"
        + "\"status\":\"new\",\"total\":42.00,\"created_at\":\"2026-10-03T06:14:39.365472+00:00\"}"));
    assertThat(first.get("after").get("total").toString()).isEqualTo("42.00");
    assertThat(first.get("key")).isEqualTo(EXACT.readTree("{\"id\":1}"));
    assertThat(first.has("xid")).isTrue();
    assertThat(first.get("before").isNull()).isTrue();
    assertThat(first.get("table").asText()).isEqualTo("public.orders");
    assertThat(first.get("ts").asText()).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z");
    // both rows of one statement: one transaction, one commit LSN, seq 0 and 1
    assertThat(inserted).extracting(m -> m.payload().get("lsn").asText()).containsOnly(first.get("lsn").asText());

    sql("update orders set status = 'paid' where id = 1",
        "begin; insert into orders (id, customer, status, total, created_at) values (3,"
            + " '{\"name\": \"Grace\", \"tier\": \"gold\"}', 'new', 99.90, '2026-10-03 06:15:03.591416+00');"
            + " delete from orders where id = 2; commit");
    List<Message> changed = read(3);
    Message u = changed.stream().filter(m -> m.partition().equals("1")).findFirst().orElseThrow();
    Message d = changed.stream().filter(m -> m.partition().equals("2")).findFirst().orElseThrow();
    Message c = changed.stream().filter(m -> m.partition().equals("3")).findFirst().orElseThrow();
    assertThat(u.payload().get("op").asText()).isEqualTo("u");
    assertThat(u.payload().get("after").get("status").asText()).isEqualTo("paid");
    assertThat(u.payload().get("before").isNull()).isTrue();
    assertThat(u.payload().get("seq").asInt()).isZero();
    assertThat(d.payload().get("op").asText()).isEqualTo("d");
    assertThat(d.payload().get("after").isNull()).isTrue();
    assertThat(d.payload().get("before")).isEqualTo(EXACT.readTree("{\"id\":2}"));
    assertThat(c.payload().get("after").get("total").toString()).isEqualTo("99.90");
    // the insert and the delete: one source transaction, same lsn and xid, ids by commit LSN and ordinal
    assertThat(c.payload().get("lsn")).isEqualTo(d.payload().get("lsn"));
    assertThat(c.payload().get("xid")).isEqualTo(d.payload().get("xid"));
    assertThat(c.payload().get("xid").asLong()).isNotEqualTo(u.payload().get("xid").asLong());
    String lsnHex = String.format("%016X", parseLsn(c.payload().get("lsn").asText()));
    assertThat(c.transactionId()).matches("pg:[0-9a-f]{8}:" + lsnHex + ":0");
    assertThat(d.transactionId()).isEqualTo(c.transactionId().replaceAll(":0$", ":1"));
    assertThat(u.transactionId()).matches("pg:[0-9a-f]{8}:[0-9A-F]{16}:0");
    ConnectorStatus st = status("orders-src");
    assertThat(st.pointerLsn()).isNotNull();
    assertThat(st.leaseNode()).isEqualTo(queen.nodeId());

    sql("create table orders_copy (like orders including all)");
    queen.connectors().put("orders-copy", """
        {"kind": "sink", "sink": {"queue": "orders", "table": "public.orders_copy", "mode": "cdc"}}""");
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("select id, customer, status, total from orders_copy order by id"),
        r -> r.equals(List.of("1 | {\"name\": \"Ada\", \"tier\": \"gold\"} | paid | 42.00",
            "3 | {\"name\": \"Grace\", \"tier\": \"gold\"} | new | 99.90")));
    assertThat(queen.connectors().delete("orders-src")).isTrue();
    await().atMost(Duration.ofSeconds(30)).until(() -> rows("select slot_name from pg_replication_slots"
        + " where database = current_database()"), List::isEmpty);
  }

  static long parseLsn(String s) {
    int slash = s.indexOf('/');
    return (Long.parseLong(s.substring(0, slash), 16) << 32) | Long.parseLong(s.substring(slash + 1), 16);
  }

  List<String> rows(String q) throws Exception {
    return new SourceFixture(db).rows(q);
  }
}
