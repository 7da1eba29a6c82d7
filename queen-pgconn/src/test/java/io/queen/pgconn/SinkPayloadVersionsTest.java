package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.DeadLetter;
import io.queen.PayloadUpcaster;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.QueenType;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A sink reads typed payloads as the node's consumers do: a payload of an older version is brought up to the
 * newest version the node knows (its {@code payloadType} registrations and upcasters) before its fields are mapped
 * onto columns; a payload of a newer version than that is a data error, tried {@code maxAttempts} times and
 * dead-lettered with a reason that names the type and both versions. Untyped payloads, and types the node knows
 * nothing of, are read as stored.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SinkPayloadVersionsTest {
  @QueenType(name = "order", version = 1)
  record OrderV1(String id, long amount) {}

  @QueenType(name = "order", version = 2)
  record Order(String id, long amount_cents, String currency) {}

  @QueenType(name = "order", version = 3)
  record OrderV3(String id, long amount_cents, String currency, String channel) {}

  @QueenType(name = "parcel", version = 5)
  record Parcel(String id, long amount_cents) {}

  private static final PayloadUpcaster V1_TO_V2 = PayloadUpcaster.ofObject(o -> {
    o.put("amount_cents", o.remove("amount").asLong() * 100);
    o.put("currency", "EUR");
  });

  /** A node that knows 'order' up to version 2: the class registered, and the upcaster from version 1. */
  private static Queen node(TestDatabase db) {
    return EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .payloadType(Order.class, "order", 2).upcaster("order", 1, V1_TO_V2).start();
  }

  private static List<String> rows(TestDatabase db, String q) throws Exception {
    return new SourceFixture(db).rows(q);
  }

  @Test
  void anOlderVersionIsUpcastBeforeItsFieldsAreMappedAndANewerOneIsDeadLetteredNamingTheVersions(TestDatabase db)
      throws Exception {
    new SourceFixture(db).sql("CREATE TABLE order_copy (id text PRIMARY KEY, amount_cents bigint, currency text,"
        + " doc jsonb)");
    try (Queen q = node(db)) {
      q.push(List.of(PushItem.to("orders", "a", new OrderV1("o-1", 42)),
          PushItem.to("orders", "a", new Order("o-2", 1250, "CHF")),
          PushItem.to("orders", "b", new OrderV3("o-3", 700, "EUR", "web")),
          PushItem.to("orders", "b", new OrderV1("o-4", 5)),
          PushItem.to("orders", "c", Map.of("id", "o-5", "amount_cents", 99)),            // untyped: as stored
          PushItem.to("orders", "c", new Parcel("o-6", 3))));                              // a type the node does not know
      q.connectors().put("order-copy", """
          {"kind": "sink", "sink": {"queue": "orders", "table": "order_copy", "mode": "upsert", "maxAttempts": 2,
                                    "metadata": {"payload": "doc"}}}""");
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(q.deadLetters("orders").group("pg-order-copy").list(10, null)).hasSize(1));
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id, amount_cents, currency from order_copy order by id")).containsExactly(
              "o-1 | 4200 | EUR", "o-2 | 1250 | CHF", "o-4 | 500 | EUR", "o-5 | 99 | null", "o-6 | 3 | null"));
      assertThat(rows(db, "select doc->>'amount_cents', doc->'amount' is null from order_copy where id = 'o-1'"))
          .as("the payload column holds the payload as read: upcast").containsExactly("4200 | t");

      DeadLetter d = q.deadLetters("orders").group("pg-order-copy").list(10, null).get(0);
      assertThat(d.partition()).isEqualTo("b");
      assertThat(d.offset()).isZero();
      assertThat(d.attempts()).isEqualTo(2);
      String why = "payload type 'order' version 3 is newer than version 2, the newest this node knows";
      assertThat(d.error()).startsWith("sink 'order-copy' gave up after 2 attempt(s): " + why)
          .doesNotContain("o-3").doesNotContain("700");
      assertThat(rows(db, "select error from queen.sink_dead_letters where sink = 'order-copy'")).singleElement()
          .asString().startsWith(why);
      await().atMost(10, TimeUnit.SECONDS).until(() -> q.status().queue("orders").group("pg-order-copy").lag() == 0);
    }
  }

  /** In sql mode a parameter's path reads the payload as read, upcast. */
  @Test
  void aSqlModeParameterReadsTheUpcastPayload(TestDatabase db) throws Exception {
    new SourceFixture(db).sql("CREATE TABLE totals (id text PRIMARY KEY, cents bigint NOT NULL)");
    try (Queen q = node(db)) {
      q.push(List.of(PushItem.to("totals", "a", new OrderV1("o-1", 42)),
          PushItem.to("totals", "a", new Order("o-2", 1250, "CHF"))));
      q.connectors().put("totals", """
          {"kind": "sink", "sink": {"queue": "totals", "mode": "sql", "maxAttempts": 1,
            "statement": "INSERT INTO totals (id, cents) VALUES ($1, $2::bigint)", "params": ["$.id", "$.amount_cents"]}}""");
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id, cents from totals order by id")).containsExactly("o-1 | 4200", "o-2 | 1250"));
      assertThat(q.deadLetters("totals").group("pg-totals").count()).isZero();
    }
  }
}
