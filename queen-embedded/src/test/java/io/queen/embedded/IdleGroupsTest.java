package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A named group nobody uses for {@code groupIdleExpiry} is removed and stops holding retention back; a group in use,
 * and the queue's default group, stay.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class IdleGroupsTest {

  private static List<String> groups(TestDatabase db, String queue) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select g.name from queen.consumer_groups g join queen.queues q"
            + " on q.id = g.queue_id where q.name = '" + queue + "' order by 1")) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  private static void age(TestDatabase db, String queue, Duration by) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.executeUpdate("update queen.consumer_groups g set last_active_at = now() - interval '" + by.toSeconds()
          + " seconds' from queen.queues q where q.id = g.queue_id and q.name = '" + queue + "'");
      // the messages too, so that retention may remove them once no group holds them
      st.executeUpdate("update queen.messages m set created_at = now() - interval '" + by.toSeconds() + " seconds'"
          + " from queen.partitions p join queen.queues q on q.id = p.queue_id where p.id = m.partition_id"
          + " and q.name = '" + queue + "'");
    }
  }

  @Test
  void anIdleGroupIsRemovedAndNoLongerHoldsRetention(TestDatabase db) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).meterRegistry(registry).start()) {
      String q = "orders";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(1)));
      for (int i = 0; i < 5; i++) {
        queen.queue(q).partition("p").push(Map.of("i", i));
      }
      // a one-off look by hand, a group that keeps working, and the queue's own work queue
      queen.queue(q).group("one-off").subscription(SubscriptionMode.ALL).batch(1).autoAck(true).pop();
      List<Message> all = queen.queue(q).group("billing").subscription(SubscriptionMode.ALL).batch(10).pop();
      queen.ack(all);
      queen.ack(queen.queue(q).consumer().batch(10).pop());
      queen.runRetentionNow(); // writes this node's activity; nothing is idle yet
      assertThat(groups(db, q)).containsExactly("__QUEUE_MODE__", "billing", "one-off");

      age(db, q, Duration.ofDays(8));
      queen.queue(q).group("billing").pop(); // billing is used again; its use is written at the next pass
      try (LogCapture logs = LogCapture.start()) {
        io.queen.RetentionRun run = queen.runRetentionNow();
        assertThat(groups(db, q)).containsExactly("__QUEUE_MODE__", "billing");
        assertThat(logs.linesWith("INFO", "removed group 'one-off' of queue 'orders'", "groupIdleExpiry")).hasSize(1);
        // one-off no longer holds the four messages it had not read
        assertThat(run.removed()).isEqualTo(5);
      }
      assertThat(registry.get("queen.groups.expired").tag("queue", q).counter().count()).isEqualTo(1);
      // a pop with its name makes it anew, as a new group starts
      queen.queue(q).partition("p").push(Map.of("i", 5));
      assertThat(queen.queue(q).group("one-off").subscription(SubscriptionMode.ALL).batch(10).pop()).hasSize(1);
    }
  }

  @Test
  void expiryOffKeepsEveryGroupAndBadValuesAreRefused(TestDatabase db) throws Exception {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(db.dataSource()).groupIdleExpiry(Duration.ofSeconds(30))
        .start()).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("groupIdleExpiry must be 0 (never) or between 1 min and 3650 days");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).groupIdleExpiry(Duration.ZERO).start()) {
      queen.queue("kept").push(Map.of("a", 1));
      queen.queue("kept").group("g").subscription(SubscriptionMode.ALL).pop();
      age(db, "kept", Duration.ofDays(400));
      queen.runRetentionNow();
      assertThat(groups(db, "kept")).containsExactly("g");
    }
  }
}
