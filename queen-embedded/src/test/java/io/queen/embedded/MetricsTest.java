package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MetricsTest {

  @Test
  void countersTimersAndGaugesCarryQueueAndGroupTagsOnly(DataSource ds) {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).meterRegistry(registry).start()) {
      queen.queue("m").configure(c -> c.retryLimit(0));
      queen.queue("m").partition("p").pushAll(List.of(Map.of("i", 1), Map.of("i", 2), Map.of("i", 3)));
      List<Message> got = queen.queue("m").consumer().batch(1).pop();
      queen.ack(got.get(0), AckStatus.FAILED, "x");
      try (Subscription s = queen.queue("m").group("g").subscription(io.queen.SubscriptionMode.ALL).batch(10)
          .consume(m -> { })) {
        await().atMost(Duration.ofSeconds(10)).until(() -> s.handled() == 3);
      }
      assertThat(registry.get("queen.messages.pushed").tag("queue", "m").counter().count()).isEqualTo(3);
      assertThat(registry.get("queen.messages.dead_lettered").tag("group", Queen.DEFAULT_GROUP).counter().count())
          .isEqualTo(1);
      assertThat(registry.get("queen.messages.acked").tag("group", "g").counter().count()).isEqualTo(3);
      assertThat(registry.get("queen.handler.duration").tag("group", "g").timer().count()).isEqualTo(3);
      assertThat(registry.get("queen.delivery.latency").tag("group", "g").timer().count()).isEqualTo(3);
      await().atMost(Duration.ofSeconds(25)).ignoreExceptions().untilAsserted(() ->
          assertThat(registry.get("queen.group.lag").tag("queue", "m").tag("group", Queen.DEFAULT_GROUP).gauge().value())
              .isEqualTo(2.0));
      assertThat(registry.getMeters()).allSatisfy(m -> assertThat(m.getId().getTags())
          .allSatisfy(t -> assertThat(t.getKey()).isIn("queue", "group", "outcome")));
    }
  }

  /**
   * Two nodes in one JVM that report to one application registry (two databases, docs/operations.md, "Metrics"): with
   * {@code meterTags} of their own their meters stay apart, and a node that closes removes its gauges only.
   * Before, they shared each meter: the first node's gauge won and its close removed the other's.
   */
  @Test
  void nodesSharingOneRegistryKeepTheirOwnMetersUnderTheirMeterTags(DataSource ds) {
    SimpleMeterRegistry app = new SimpleMeterRegistry();
    try (Queen b = EmbeddedQueen.builder().dataSource(ds).nodeId("b").meterRegistry(app).meterTags("queen.db", "b")
        .start()) {
      try (Queen a = EmbeddedQueen.builder().dataSource(ds).nodeId("a").meterRegistry(app)
          .meterTags("queen.db", "a", "team", "billing").start()) {
        a.queue("shared").partition("p").pushAll(List.of(Map.of("i", 1), Map.of("i", 2)));
        b.queue("shared").partition("p").pushAll(List.of(Map.of("i", 3), Map.of("i", 4), Map.of("i", 5)));
        assertThat(a.queue("shared").consumer().pop()).hasSize(1); // the default group: a lag to watch (5, none acked)
        assertThat(app.get("queen.messages.pushed").tag("queen.db", "a").tag("team", "billing").tag("queue", "shared")
            .counter().count()).isEqualTo(2);
        assertThat(app.get("queen.messages.pushed").tag("queen.db", "b").tag("queue", "shared").counter().count())
            .isEqualTo(3);
        await().atMost(Duration.ofSeconds(25)).ignoreExceptions().untilAsserted(() -> {
          for (String node : List.of("a", "b")) {
            assertThat(app.get("queen.group.lag").tag("queen.db", node).tag("queue", "shared")
                .tag("group", Queen.DEFAULT_GROUP).gauge().value()).isEqualTo(5.0);
          }
        });
        assertThat(app.getMeters()).allSatisfy(m -> assertThat(m.getId().getTag("queen.db")).isIn("a", "b"));
      }
      assertThat(app.find("queen.group.lag").tag("queen.db", "a").gauges()).isEmpty();
      assertThat(app.get("queen.group.lag").tag("queen.db", "b").tag("queue", "shared").gauge().value()).isEqualTo(5.0);
    }
  }

  @Test
  void meterTagsAreCheckedBeforeTheStart(DataSource ds) {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).meterTags("a").start())
        .isInstanceOf(IllegalArgumentException.class).hasMessage("meterTags must be key/value pairs, was 1 string(s)");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).meterTags("queue", "x", "9x", "y", "k", "", "k", "z")
        .start()).isInstanceOf(IllegalArgumentException.class).hasMessage("4 invalid options: meterTags key 'queue' is"
            + " one of Queen's own tags [connector, group, outcome, queue]; meterTags key 1 must match"
            + " [A-Za-z][A-Za-z0-9._-]{0,63}, was '9x'; meterTags value of key 2 must be 1..256 characters, was 0"
            + " character(s); meterTags key 'k' is given twice");
  }

  /**
   * What an operator reads off the counters matches what was stored: a transaction's pushes count as pushes (they did
   * not), and a message dropped because its queue keeps no dead letters is counted as dropped, not as dead-lettered.
   */
  @Test
  void transactionalPushesCountAndDropsAreNotDeadLetters(DataSource ds) {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).meterRegistry(registry).start()) {
      assertThat(queen.transaction().push("txq", "a", Map.of("i", 1)).push("txq", "b", Map.of("i", 2)).commit()
          .success()).isTrue();
      assertThat(registry.get("queen.messages.pushed").tag("queue", "txq").counter().count()).isEqualTo(2);

      queen.queue("drop").configure(c -> c.retryLimit(0).deadLetter(false));
      queen.queue("drop").push(Map.of("i", 1));
      queen.queue("kept").configure(c -> c.retryLimit(0));
      queen.queue("kept").push(Map.of("i", 1));
      queen.ack(queen.queue("drop").consumer().pop().get(0), AckStatus.FAILED, "x");
      queen.ack(queen.queue("kept").consumer().pop().get(0), AckStatus.FAILED, "x");
      assertThat(registry.get("queen.messages.dropped").tag("queue", "drop").counter().count()).isEqualTo(1);
      assertThat(registry.find("queen.messages.dead_lettered").tag("queue", "drop").counter()).isNull();
      assertThat(registry.get("queen.messages.dead_lettered").tag("queue", "kept").counter().count()).isEqualTo(1);
      assertThat(queen.status().queue("drop").group(Queen.DEFAULT_GROUP).deadLetters()).isZero();
    }
  }

  /**
   * A meter that throws (here a registry filter; in the field a Micrometer older than the one Queen was compiled
   * against, which threw NoSuchMethodError after the push had committed) must not fail the work it reports on: the
   * push returns its result, the consume loop goes on, the metrics turn off with one ERROR line.
   */
  @Test
  void aMeterThatThrowsTurnsTheMetricsOffInsteadOfFailingThePushOrTheLoop(DataSource ds) {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    registry.config().meterFilter(new io.micrometer.core.instrument.config.MeterFilter() {
      @Override
      public io.micrometer.core.instrument.Meter.Id map(io.micrometer.core.instrument.Meter.Id id) {
        throw new IllegalStateException("a registry that refuses every meter");
      }
    });
    try (LogCapture logs = LogCapture.start();
        Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("mt-off").meterRegistry(registry).start()) {
      assertThat(queen.queue("off").partition("p").push(Map.of("i", 1)).status()).isEqualTo(io.queen.PushStatus.QUEUED);
      queen.queue("off").partition("p").push(Map.of("i", 2));
      try (Subscription s = queen.queue("off").group("g").subscription(io.queen.SubscriptionMode.ALL)
          .consume(m -> { })) {
        await().atMost(Duration.ofSeconds(10)).until(() -> s.acked() == 2);
        assertThat(s.isRunning()).isTrue();
      }
      assertThat(logs.lines()).filteredOn(l -> l.contains("a Micrometer call failed")).hasSize(1)
          .allSatisfy(l -> assertThat(l).contains("mt-off").contains("metrics are off"));
    }
  }
}
