package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
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
}
