package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.queen.DeadLetter;
import io.queen.Message;
import io.queen.PayloadTypeException;
import io.queen.PayloadUpcaster;
import io.queen.Queen;
import io.queen.QueenType;
import io.queen.Subscription;
import io.queen.testkit.QueenPostgres;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Typed payloads carry a stable type name and schema version on disk (never the Java
 * class name), are checked on read, upcast from older versions, and refuse a newer version or another type
 * with {@link PayloadTypeException}, which then follows the queue's retry and dead-letter rules.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TypedPayloadTest {
  @QueenType(name = "order", version = 1)
  record OrderV1(String id, long amount) {}

  @QueenType(name = "order", version = 2)
  record OrderV2(String id, long amountCents, String currency) {}

  @QueenType(name = "order", version = 3)
  record OrderV3(String id, long amountCents, String currency, String channel) {}

  /** The same type as {@link OrderV1} under another Java name, as after a rename or a move. */
  @QueenType(name = "order", version = 1)
  record RenamedOrder(String id, long amount) {}

  @QueenType(name = "invoice", version = 1)
  record Invoice(String number) {}

  /** Not annotated: typed only through the builder. */
  record Refund(String id, BigDecimal amount) {}

  private static final PayloadUpcaster V1_TO_V2 = PayloadUpcaster.ofObject(o -> {
    o.put("amountCents", o.remove("amount").asLong() * 100);
    o.put("currency", "EUR");
  });
  private static final PayloadUpcaster V2_TO_V3 = PayloadUpcaster.ofObject(o -> o.put("channel", "web"));

  private DataSource ds;
  private Queen queen;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("typed").upcaster("order", 1, V1_TO_V2)
        .upcaster("order", 2, V2_TO_V3).payloadType(Refund.class, "refund", 4).start();
    q = "typed-" + info.getTestMethod().orElseThrow().getName();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private Message popOne() {
    List<Message> got = queen.queue(q).consumer().pop();
    assertThat(got).hasSize(1);
    return got.get(0);
  }

  /** The stored type columns of the message at {@code offset}: type, version. */
  private List<Object> stored(long offset) throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.payload_type,"
        + " m.payload_version, m.payload::text from queen.messages m join queen.partitions p on p.id = m.partition_id"
        + " join queen.queues q on q.id = p.queue_id where q.name = ? and m.\"offset\" = ?")) {
      st.setString(1, q);
      st.setLong(2, offset);
      try (ResultSet rs = st.executeQuery()) {
        assertThat(rs.next()).isTrue();
        return java.util.Arrays.asList(rs.getString(1), (Integer) rs.getObject(2), rs.getString(3));
      }
    }
  }

  @Test
  void recordRoundTripStoresTypeNameAndVersionNeverTheClassName() throws Exception {
    OrderV2 sent = new OrderV2("order-101", 4200, "EUR");
    queen.queue(q).push(sent);
    Message m = popOne();
    assertThat(m.payloadType()).isEqualTo("order");
    assertThat(m.payloadVersion()).isEqualTo(2);
    assertThat(m.payload(OrderV2.class)).isEqualTo(sent);
    assertThat(m.payload().toString()).isEqualTo("{\"id\":\"order-101\",\"currency\":\"EUR\",\"amountCents\":4200}");
    assertThat(stored(0)).containsExactly("order", 2, "{\"id\": \"order-101\", \"currency\": \"EUR\", \"amountCents\": 4200}");
    assertThat(stored(0).toString()).doesNotContain("OrderV2").doesNotContain("TypedPayloadTest");
    queen.ack(m);

    // registered on the builder, without an annotation
    queen.queue(q).push(new Refund("r-1", new BigDecimal("12.50")));
    assertThat(stored(1).subList(0, 2)).containsExactly("refund", 4);
    Message r = popOne();
    assertThat(r.payload(Refund.class)).isEqualTo(new Refund("r-1", new BigDecimal("12.50")));
  }

  @Test
  void upcastersConvertOlderVersionsOnReadAndChain() throws Exception {
    queen.queue(q).push(new OrderV1("order-7", 42));
    Message m = popOne();
    assertThat(m.payloadVersion()).isEqualTo(1);
    assertThat(m.payload(OrderV2.class)).isEqualTo(new OrderV2("order-7", 4200, "EUR"));
    assertThat(m.payload(OrderV3.class)).isEqualTo(new OrderV3("order-7", 4200, "EUR", "web"));
    assertThat(m.payload(OrderV1.class)).isEqualTo(new OrderV1("order-7", 42));
    // the stored JSON and the raw payload are never changed by an upcaster
    assertThat(m.payload().toString()).isEqualTo("{\"id\":\"order-7\",\"amount\":42}");
    assertThat(stored(0)).containsExactly("order", 1, "{\"id\": \"order-7\", \"amount\": 42}");
  }

  @Test
  void aMissingUpcasterIsNamed() {
    try (Queen bare = EmbeddedQueen.builder().dataSource(ds).nodeId("bare").listen(false).janitor(false).start()) {
      bare.queue(q).push(new OrderV1("order-8", 1));
      Message m = bare.queue(q).consumer().pop().get(0);
      assertThatThrownBy(() -> m.payload(OrderV2.class)).isInstanceOfSatisfying(PayloadTypeException.class, e -> {
        assertThat(e.reason()).isEqualTo(PayloadTypeException.Reason.NO_UPCASTER);
        assertThat(e.storedVersion()).isEqualTo(1);
        assertThat(e.understoodVersion()).isEqualTo(2);
        assertThat(e.getMessage()).contains("no upcaster from version 1 to 2").contains("upcaster(\"order\", 1, ...)")
            .doesNotContain("order-8");
      });
    }
  }

  @Test
  void aNewerVersionFailsTheHandlerAndFollowsRetriesIntoTheDeadLetterQueue() {
    queen.queue(q).configure(c -> c.retryLimit(2));
    queen.queue(q).push(new OrderV3("order-9", 100, "EUR", "shop"));
    queen.queue(q).push(new OrderV2("order-10", 200, "EUR"));

    Message peek = popOne();
    assertThatThrownBy(() -> peek.payload(OrderV2.class)).isInstanceOfSatisfying(PayloadTypeException.class, e -> {
      assertThat(e.reason()).isEqualTo(PayloadTypeException.Reason.NEWER_VERSION);
      assertThat(e.storedType()).isEqualTo("order");
      assertThat(e.storedVersion()).isEqualTo(3);
      assertThat(e.understoodVersion()).isEqualTo(2);
      assertThat(e.getMessage()).contains("version 3, newer than version 2").contains("deploy consumers")
          .doesNotContain("order-9").doesNotContain("shop");
    });
    queen.ack(peek, io.queen.AckStatus.FAILED, "peeked");  // attempt 1 of 3

    AtomicInteger calls = new AtomicInteger();
    List<OrderV2> read = new java.util.concurrent.CopyOnWriteArrayList<>();
    try (Subscription s = queen.queue(q).consumer().consume(msg -> {
      calls.incrementAndGet();
      read.add(msg.payload(OrderV2.class));
    })) {
      await().atMost(Duration.ofSeconds(30)).until(() -> read.size() == 1);
    }
    // 1 peek + 2 handler attempts of the v3 message (retryLimit 2), then one delivery of the v2 message
    assertThat(calls.get()).isEqualTo(3);
    assertThat(read).containsExactly(new OrderV2("order-10", 200, "EUR"));
    List<DeadLetter> dl = queen.deadLetters(q).defaultGroup().list(10, null);
    assertThat(dl).hasSize(1);
    assertThat(dl.get(0).offset()).isZero();
    assertThat(dl.get(0).attempts()).isEqualTo(3);
    assertThat(dl.get(0).error()).contains("'order' version 3, newer than version 2");
    // the raw JSON is still there for a consumer that understands version 3 after a redrive
    assertThat(dl.get(0).payload().path("channel").asText()).isEqualTo("shop");
  }

  @Test
  void anotherTypeIsRefusedNotParsed() {
    queen.queue(q).push(new Invoice("INV-1"));
    Message m = popOne();
    assertThatThrownBy(() -> m.payload(OrderV2.class)).isInstanceOfSatisfying(PayloadTypeException.class, e -> {
      assertThat(e.reason()).isEqualTo(PayloadTypeException.Reason.OTHER_TYPE);
      assertThat(e.getMessage()).contains("of type 'invoice' version 1, not 'order'");
    });
    assertThat(m.payload(Invoice.class)).isEqualTo(new Invoice("INV-1"));
    // an untyped class reads any message as JSON
    assertThat(m.payload(Map.class)).isEqualTo(Map.of("number", "INV-1"));
  }

  @Test
  void aRenamedClassReadsOldMessages() throws Exception {
    queen.queue(q).push(new OrderV1("order-11", 5));
    Message m = popOne();
    assertThat(m.payload(RenamedOrder.class)).isEqualTo(new RenamedOrder("order-11", 5));
    assertThat(m.payload(OrderV2.class)).isEqualTo(new OrderV2("order-11", 500, "EUR"));
  }

  @Test
  void untypedMessagesAreUnchanged() throws Exception {
    queen.queue(q).push(Map.of("id", "x", "amount", 3));
    queen.queue(q).push(io.queen.Json.of("{\"id\":\"y\",\"amount\":4}"));
    assertThat(stored(0).subList(0, 2)).containsExactly(null, null);
    assertThat(stored(1).subList(0, 2)).containsExactly(null, null);
    List<Message> got = queen.queue(q).consumer().batch(2).pop();
    assertThat(got).hasSize(2);
    assertThat(got.get(0).payloadType()).isNull();
    assertThat(got.get(0).payloadVersion()).isZero();
    // an untyped message read as a typed class is read without a check (how a queue adopts types)
    assertThat(got.get(0).payload(OrderV1.class)).isEqualTo(new OrderV1("x", 3));
    assertThat(got.get(1).payload(OrderV1.class)).isEqualTo(new OrderV1("y", 4));
  }

  @Test
  void typedAndUntypedInOneBatchAndThroughTheFullPush() throws Exception {
    queen.queue(q).push(List.of(io.queen.PushItem.of(Map.of("a", 1)), io.queen.PushItem.of(new OrderV2("o", 1, "EUR")),
        io.queen.PushItem.of(new Invoice("i")).transactionId("t-1")));  // a caller id: the de-duplicating push
    assertThat(stored(0).subList(0, 2)).containsExactly(null, null);
    assertThat(stored(1).subList(0, 2)).containsExactly("order", 2);
    assertThat(stored(2).subList(0, 2)).containsExactly("invoice", 1);
    // inside a transaction bundle too
    queen.transaction().push(q, "Default", new OrderV3("o3", 1, "EUR", "x")).commit();
    assertThat(stored(3).subList(0, 2)).containsExactly("order", 3);
  }

  @Test
  void builderRefusesBadRegistrations() {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).payloadType(Refund.class, "bad name", 1)
        .upcaster("order", 0, V1_TO_V2).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'bad name' is invalid")
        .hasMessageContaining("version must be >= 1");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).upcaster("order", 1, V1_TO_V2)
        .upcaster("order", 1, V2_TO_V3).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("two upcasters from version 1");
  }
}
