package io.queen.embedded.internal.ops;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.QueenMeterBinder;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The per-group gauges ({@code queen.group.lag}, {@code queen.group.pending.age}, {@code queen.group.pending.alert}),
 * the lag alarm logged once per crossing, the retention gauges, the listener gauge, and a registry bound after
 * the start through {@link QueenMeterBinder}.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GroupGaugesTest {

  @Test
  void lagPendingAgeAndTheAlarmCrossedOnce(DataSource ds) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).meterRegistry(registry).start();
        LogCapture logs = LogCapture.start()) {
      GroupWatch watch = Watches.groups(queen);
      queen.queue("orders").configure(c -> c.retention(Duration.ofDays(1)).pendingAlertAfter(Duration.ofMinutes(5)));
      queen.queue("orders").partition("a").pushAll(List.of(Map.of("i", 1), Map.of("i", 2)));
      queen.queue("orders").partition("b").push(Map.of("i", 3));
      List<Message> first = queen.queue("orders").group("billing").subscription(SubscriptionMode.ALL).partition("a")
          .batch(1).pop();
      queen.ack(first);
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
          "update queen.messages set created_at = created_at - interval '10 minutes'")) {
        st.executeUpdate();
      }
      watch.run();
      watch.run();
      assertThat(gauge(registry, "queen.group.lag", "billing")).isEqualTo(2.0);
      assertThat(gauge(registry, "queen.group.pending.age", "billing")).isBetween(600.0, 700.0);
      assertThat(gauge(registry, "queen.group.pending.alert", "billing")).isEqualTo(1.0);
      assertThat(queen.status().queue("orders").group("billing").pendingAlert()).isTrue();
      assertThat(queen.status().queue("orders").group("billing").pendingAge()).isGreaterThan(Duration.ofMinutes(9));
      assertThat(logs.linesWith(Watches.here(), "WARN", "group 'billing' of queue 'orders'", "past pendingAlertAfter (300 s)",
          "lag 2 message(s)")).hasSize(1);

      // a registry bound after the start sees every meter, those there already and those to come
      SimpleMeterRegistry late = new SimpleMeterRegistry();
      new QueenMeterBinder(queen).bindTo(late);
      List<Message> rest = queen.queue("orders").group("billing").partitions(2).batch(10).pop();
      assertThat(queen.ack(rest)).allSatisfy(r -> assertThat(r.success()).isTrue());
      watch.run();
      assertThat(gauge(registry, "queen.group.lag", "billing")).isZero();
      assertThat(gauge(late, "queen.group.pending.alert", "billing")).isZero();
      assertThat(late.get("queen.messages.acked").tag("group", "billing").counter().count()).isEqualTo(2);
      assertThat(logs.linesWith(Watches.here(), "INFO", "group 'billing' of queue 'orders' is back under pendingAlertAfter")).hasSize(1);
      assertThat(late.get("queen.listener.connected").gauge().value()).isEqualTo(1.0);

      // retention gauges: the oldest kept message's age, and the group holding it back
      queen.queue("orders").push(Map.of("i", 4));
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
          "update queen.messages set created_at = created_at - interval '2 days'")) {
        st.executeUpdate();
      }
      queen.runRetentionNow(); // billing has passed a and b; nobody has read Default yet: the queue's default group
      queen.queue("orders").consumer().batch(1).pop(); // creates the default group at the beginning of every partition
      queen.runRetentionNow();
      watch.run();
      assertThat(late.get("queen.retention.oldest.age").tag("queue", "orders").gauge().value()).isGreaterThan(86_400.0);
      assertThat(late.get("queen.retention.holding").tag("queue", "orders").tag("group", Queen.DEFAULT_GROUP).gauge()
          .value()).isEqualTo(1.0);
      assertThat(registry.getMeters()).allSatisfy(m -> assertThat(m.getId().getTags())
          .allSatisfy(t -> assertThat(t.getKey()).isIn("queue", "group", "outcome")));
    }
  }

  /**
   * A deleted group's or queue's gauges go at the next pass (they kept their last values, an alert raised for ever), and
   * a closed node's gauges leave the registry, while its counters stay.
   */
  @Test
  void gaugesOfDeletedGroupsAndQueuesAndOfAClosedNodeGo(DataSource ds) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).meterRegistry(registry).start();
    try {
      GroupWatch watch = Watches.groups(queen);
      queen.queue("gone").configure(c -> c.retention(Duration.ofDays(1)).pendingAlertAfter(Duration.ofSeconds(1)));
      queen.queue("kept").configure(c -> c.retention(Duration.ofDays(1)));
      queen.queue("gone").partition("a").push(Map.of("i", 1));
      queen.queue("kept").partition("a").push(Map.of("i", 1));
      queen.queue("gone").group("slow").subscription(SubscriptionMode.ALL).batch(1).partitions(1).pop(); // subscribes
      queen.queue("kept").group("slow").subscription(SubscriptionMode.ALL).batch(1).partitions(1).pop();
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
          "update queen.messages set created_at = created_at - interval '2 days'")) {
        st.executeUpdate();
      }
      queen.queue("gone").push(Map.of("i", 2));
      queen.queue("kept").push(Map.of("i", 2));
      queen.runRetentionNow();
      watch.run();
      assertThat(registry.get("queen.group.pending.alert").tag("queue", "gone").tag("group", "slow").gauge().value())
          .isEqualTo(1.0);
      assertThat(registry.get("queen.retention.holding").tag("queue", "gone").tag("group", "slow").gauge().value())
          .as("slow holds the queue back").isEqualTo(1.0);
      assertThat(registry.find("queen.retention.oldest.age").tag("queue", "gone").gauge()).isNotNull();

      queen.queue("gone").group("slow").delete();
      watch.run();
      assertThat(registry.find("queen.group.pending.alert").tag("queue", "gone").tag("group", "slow").gauge()).isNull();
      assertThat(registry.find("queen.group.lag").tag("queue", "gone").tag("group", "slow").gauge()).isNull();
      // the retention state still names the deleted group until the next retention pass: it holds nothing now
      assertThat(registry.find("queen.retention.holding").tag("queue", "gone").tag("group", "slow").gauge()).isNull();
      assertThat(registry.find("queen.retention.oldest.age").tag("queue", "gone").gauge()).isNotNull(); // queue kept

      queen.queue("gone").delete();
      watch.run();
      assertThat(registry.find("queen.group.lag").tag("queue", "gone").gauges()).isEmpty();
      assertThat(registry.find("queen.group.pending.age").tag("queue", "gone").gauges()).isEmpty();
      assertThat(registry.find("queen.retention.oldest.age").tag("queue", "gone").gauge()).isNull();
      assertThat(registry.find("queen.group.lag").tag("queue", "kept").tag("group", "slow").gauge()).isNotNull();
    } finally {
      queen.close();
    }
    // closed: no gauge of the node is left to show a stale value; the counters stay, as counters do
    assertThat(registry.find("queen.group.lag").gauges()).isEmpty();
    assertThat(registry.find("queen.retention.oldest.age").gauges()).isEmpty();
    assertThat(registry.find("queen.listener.connected").gauge()).isNull();
    assertThat(registry.get("queen.messages.pushed").tag("queue", "kept").counter().count()).isEqualTo(2);
  }

  private static double gauge(SimpleMeterRegistry r, String name, String group) {
    return r.get(name).tag("queue", "orders").tag("group", group).gauge().value();
  }
}
