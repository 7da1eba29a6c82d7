package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import io.queen.AckStatus;
import io.queen.DeadLetter;
import io.queen.Json;
import io.queen.Kv;
import io.queen.Message;
import io.queen.PayloadSerializationException;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/** One payload limit at push, JSON text checked in Java, the reader as large as the writer. */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PayloadLimitsTest {
  private static final int MIB = 1024 * 1024;
  private DataSource ds;
  private Queen queen;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("t1").start();
    q = "q-" + info.getTestMethod().orElseThrow().getName();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private long storedMessages() throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from queen.messages m join queen.partitions p on p.id = m.partition_id"
            + " join queen.queues q on q.id = p.queue_id where q.name = '" + q + "'")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  @Test
  void fiftyMegabytePayloadIsRefusedAtPushWithItsIndex() throws Exception {
    String big = "x".repeat(50 * MIB);
    List<PushItem> items = List.of(PushItem.of("p", Map.of("n", 0)), PushItem.of("p", Map.of("n", 1)),
        PushItem.of("p", Map.of("n", 2)), PushItem.of("p", Map.of("s", big)));
    assertThatThrownBy(() -> queen.queue(q).push(items)).isInstanceOf(PayloadSerializationException.class)
        .hasMessage("items[3].payload is " + (50 * MIB + 8) + " bytes of JSON; the limit is 8388608 (maxPayloadBytes)");
    // JSON text is measured the same way, and multi-byte characters count as their UTF-8 bytes
    assertThatThrownBy(() -> queen.queue(q).push(Json.of("\"" + "é".repeat(4 * MIB) + "\"")))
        .isInstanceOf(PayloadSerializationException.class)
        .hasMessage("items[0].payload is " + (8 * MIB + 2) + " bytes of JSON; the limit is 8388608 (maxPayloadBytes)");
    assertThat(storedMessages()).isZero();
    // at the limit it is stored and read back
    String atLimit = "y".repeat(8 * MIB - 2);
    queen.queue(q).push(Json.of("\"" + atLimit + "\""));
    assertThat(queen.queue(q).consumer().autoAck(true).pop()).singleElement()
        .satisfies(m -> assertThat(m.payload().textValue()).hasSize(8 * MIB - 2));
  }

  @Test
  void threeHundredMegabytePayloadIsRefusedWithoutReachingPostgres() throws Exception {
    Json huge = Json.of("\"" + "z".repeat(300_000_000) + "\"");
    long t0 = System.nanoTime();
    assertThatThrownBy(() -> queen.queue(q).push(huge)).isInstanceOf(PayloadSerializationException.class)
        .hasMessage("items[0].payload is 300000002 bytes of JSON; the limit is 8388608 (maxPayloadBytes)");
    // a serialised object is measured as it is written (the text's quotes are escaped), and not kept past the limit
    Map<String, Object> obj = Map.of("s", huge.text());
    assertThatThrownBy(() -> queen.transaction().push(q, "p", obj)).isInstanceOf(PayloadSerializationException.class)
        .hasMessage("operations[0].payload is 300000012 bytes of JSON; the limit is 8388608 (maxPayloadBytes)");
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(20));
    assertThat(storedMessages()).isZero();
  }

  @Test
  void largePayloadsUpToTheConfiguredLimitAreReadBackAndTheApplicationsMapperIsNotChanged() {
    ObjectMapper mine = new ObjectMapper();
    int before = mine.getFactory().streamReadConstraints().getMaxStringLength();
    try (Queen big = EmbeddedQueen.builder().dataSource(ds).nodeId("big").objectMapper(mine)
        .maxPayloadBytes(EmbeddedQueen.MAX_PAYLOAD_BYTES_LIMIT).start()) {
      String s = "x".repeat(50 * MIB); // beyond Jackson's default 20 MB string limit
      big.queue(q).configure(c -> c.retryLimit(0));
      big.queue(q).push(Map.of("s", s));
      List<Message> got = big.queue(q).consumer().pop();
      assertThat(got).singleElement().satisfies(m -> assertThat(m.payload().get("s").textValue()).hasSize(50 * MIB));
      big.ack(got.get(0), AckStatus.DEAD_LETTER, "kept for the list");
      // a node with the default limit reads it too: the reader holds what any node may write
      List<DeadLetter> dl = queen.deadLetters(q).defaultGroup().list(10, null);
      assertThat(dl).singleElement().satisfies(d -> {
        assertThat(d.payload().get("s").textValue()).hasSize(50 * MIB);
        assertThat(d.payloadError()).isNull();
        assertThat(d.payloadBytes()).isEqualTo(50 * MIB + 9); // as jsonb prints it: {"s": "..."}
      });
    }
    assertThat(mine.getFactory().streamReadConstraints().getMaxStringLength()).isEqualTo(before);
  }

  @Test
  void jsonTextThatPostgresWouldRefuseIsRefusedInJavaNamingTheItem() throws Exception {
    Map<String, String> bad = new java.util.LinkedHashMap<>();
    bad.put("", "the text is empty");
    bad.put("   ", "the text is empty");
    bad.put("{\"a\":1} trailing", "syntax error at line 1, column");
    bad.put("1 2", "more than one value, or trailing text");
    bad.put("{\"a\":1}{\"b\":2}", "more than one value, or trailing text");
    bad.put("{\"a\":\"x\\u0000y\"}", "escape \\u0000 (NUL)");
    bad.put("{\"\\u0000\":1}", "escape \\u0000 (NUL)");
    bad.put("\"a\u0000b\"", "NUL character");
    bad.put("\"\\ud800\"", "unpaired UTF-16 surrogate");
    bad.put("\"\\udc00\\ud800\"", "unpaired UTF-16 surrogate");
    bad.put("{'a':1}", "syntax error");
    bad.put("[1,]", "syntax error");
    bad.put("[".repeat(1001) + "]".repeat(1001), "beyond the reader's limits");
    bad.put("{\"n\":" + "9".repeat(1001) + "}", "beyond the reader's limits");
    bad.put("{\"" + "k".repeat(50_001) + "\":1}", "beyond the reader's limits");
    bad.put("\"\\é\"", "syntax error");
    for (Map.Entry<String, String> e : bad.entrySet()) {
      List<PushItem> items = List.of(PushItem.of("p", 1), PushItem.of("p", 2), PushItem.of("p", Json.of(e.getKey())));
      assertThatThrownBy(() -> queen.queue(q).push(items)).as(e.getKey()).isInstanceOf(PayloadSerializationException.class)
          .hasMessageStartingWith("items[2].payload ").hasMessageContaining(e.getValue());
    }
    // serialised values that would come out as the NUL escape or an unpaired surrogate
    assertThatThrownBy(() -> queen.queue(q).push(JsonNodeFactory.instance.textNode("a\u0000b")))
        .isInstanceOf(PayloadSerializationException.class).hasMessageContaining("items[0].payload holds the escape");
    assertThatThrownBy(() -> queen.queue(q).push(Map.of("k", "\ud800")))
        .isInstanceOf(PayloadSerializationException.class).hasMessageContaining("unpaired");
    // KV values and transaction pushes, the same rules, before any SQL
    assertThatThrownBy(() -> queen.kv().put("ns", "k", Json.of("1 2"), Kv.forever()))
        .isInstanceOf(PayloadSerializationException.class).hasMessageStartingWith("value is not valid JSON");
    assertThatThrownBy(() -> queen.kv().put("ns", "k", Map.of("s", "\u0000"), Kv.forever()))
        .isInstanceOf(PayloadSerializationException.class).hasMessageStartingWith("value holds the escape");
    assertThatThrownBy(() -> queen.transaction().put("ns2", "k", 1, Kv.forever()).push(q, "p", Json.of("")))
        .isInstanceOf(PayloadSerializationException.class).hasMessageStartingWith("operations[1].payload");
    assertThat(storedMessages()).isZero();
    assertThat(queen.kv().get("ns", "k").found()).isFalse();

    // legal text: an escaped backslash followed by "u0000", a surrogate pair, nesting and numbers at the limits
    List<String> good = List.of("\"\\\\u0000\"", "\"\\ud83d\\ude00\"", "\"\ud83d\ude00\"", "[".repeat(1000) + "]".repeat(1000),
        "{\"n\":" + "9".repeat(1000) + "}", " {\"a\" : [1, 2.5e3, true, null]} ", "{\"" + "k".repeat(50_000) + "\":1}");
    for (String g : good) {
      queen.queue(q).push(Json.of(g));
    }
    List<Message> got = queen.queue(q).consumer().batch(10).autoAck(true).pop();
    assertThat(got).hasSize(good.size());
    assertThat(got.get(0).payload().textValue()).isEqualTo("\\u0000");
    assertThat(got.get(1).payload().textValue()).isEqualTo("\ud83d\ude00");
  }

  @Test
  void aStringHoldingJsonOfAnObjectOrArrayIsRefusedWithTheFix() throws Exception {
    for (String text : List.of("{\"id\":1}", "  [1, 2]\n")) {
      assertThatThrownBy(() -> queen.queue(q).push(text)).isInstanceOf(PayloadSerializationException.class)
          .hasMessageStartingWith("items[0].payload is a String that holds the JSON text of an")
          .hasMessageContaining("Json.of(text)").hasMessageContaining("TextNode");
    }
    assertThatThrownBy(() -> queen.kv().put("ns", "j", "{\"a\":1}", Kv.forever()))
        .isInstanceOf(PayloadSerializationException.class).hasMessageContaining("Json.of(text)");
    assertThatThrownBy(() -> queen.transaction().push(q, "p", "[1]"))
        .isInstanceOf(PayloadSerializationException.class).hasMessageStartingWith("operations[0].payload");
    assertThat(storedMessages()).isZero();
    assertThat(queen.kv().get("ns", "j").found()).isFalse();

    // what is meant: the JSON itself, or such text as a string on purpose; and strings that only look like JSON
    queen.queue(q).push(Json.of("{\"id\":1}"));
    queen.queue(q).push(JsonNodeFactory.instance.textNode("{\"id\":1}"));
    queen.queue(q).push("{not json}");
    queen.queue(q).push("plain text");
    List<Message> got = queen.queue(q).consumer().batch(10).autoAck(true).pop();
    assertThat(got).extracting(m -> m.payload().toString())
        .containsExactly("{\"id\":1}", "\"{\\\"id\\\":1}\"", "\"{not json}\"", "\"plain text\"");
  }
}
