package io.queen.examples;

import io.queen.AckStatus;
import io.queen.DeadLetter;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/**
 * The main demo: push to a few partitions, consume with a consumer group, watch a failing message go
 * through its retries into the dead-letter queue, and (once the KV store is there) commit a marker, a
 * push and an ack together with {@code once()}.
 *
 * <p>Runs against {@code QUEEN_JDBC_URL} when set, else an embedded PostgreSQL 17. The source connector's part needs
 * PostgreSQL 17 or later with {@code wal_level=logical}; on another server it is skipped with the reason.
 */
public final class DemoMain {
  private DemoMain() {}

  public static void main(String[] args) throws Exception {
    try (Example db = Example.database("demo");
        Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("demo").start()) {
      say("Queen started on " + db.description());

      // 1. a queue with a short retry cycle, so the demo shows the dead-letter queue quickly
      queen.queue("orders").configure(c -> c.retryLimit(2).retryDelay(Duration.ofMillis(100)));

      // 2. push 12 orders over 3 partitions (one per customer: per-customer order is kept)
      List<PushItem> items = new ArrayList<>();
      for (int i = 1; i <= 12; i++) {
        String customer = "customer-" + (i % 3 + 1);
        items.add(PushItem.of(customer, Map.of("order", i, "customer", customer, "amount", i * 10))
            .transactionId("order-" + i));
      }
      List<PushResult> pushed = queen.queue("orders").push(items);
      say("pushed " + pushed.size() + " orders to partitions customer-1..3 in one transaction");
      PushResult again = queen.queue("orders").partition("customer-2").push(
          PushItem.of("customer-2", Map.of("order", 1)).transactionId("order-1"));
      say("pushing order-1 again: " + again.status() + " (same transaction id, stored once)");

      // 3. consume with the group "billing": 2 workers, batches of 4; order 7 always fails
      int expected = 12;
      CountDownLatch settled = new CountDownLatch(expected);
      Map<String, List<Integer>> seen = new ConcurrentHashMap<>();
      AtomicInteger failures = new AtomicInteger();
      Subscription billing = queen.queue("orders").group("billing").subscription(SubscriptionMode.ALL)
          .concurrency(2).batch(4).partitions(2).consume(m -> {
            int order = m.payload().get("order").asInt();
            if (order == 7) {
              failures.incrementAndGet();
              if (m.attempt() == 3) {
                settled.countDown(); // the last try: it goes to the dead-letter queue now
              }
              throw new IllegalStateException("card declined for order 7 (attempt " + m.attempt() + ")");
            }
            seen.computeIfAbsent(m.partition(), p -> new ArrayList<>()).add(order);
            settled.countDown();
          });
      if (!settled.await(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("the demo's consumer did not finish in 30 s");
      }
      billing.close();
      seen.keySet().stream().sorted().forEach(p -> say("billing handled " + p + " in order: " + seen.get(p)));
      say("order 7 failed " + failures.get() + " times (1 try + retryLimit 2 retries)");
      for (DeadLetter d : queen.deadLetters("orders").group("billing").list(10, null)) {
        say("dead letter: partition " + d.partition() + ", offset " + d.offset() + ": order " + d.payload().get("order")
            + " after " + d.attempts() + " attempts: \"" + d.error() + "\"");
      }

      // 4. another group reads the same log independently, with manual pop and ack
      List<Message> audit = queen.queue("orders").group("audit").subscription(SubscriptionMode.ALL)
          .batch(100).partitions(3).pop();
      queen.ack(audit, AckStatus.COMPLETED, null);
      say("group audit popped and acked " + audit.size() + " messages on its own cursor");

      // 5. one transaction: a row of the application's table, a marker, a push and an ack commit together or not at all
      OnceDemo.run(queen, db.dataSource(), DemoMain::say);

      // 6. a queue written into a table by a sink connector, exactly once
      SinkDemo.run(queen, db.dataSource(), DemoMain::say);

      // 7. a table streamed into a queue through logical replication, and back into a table
      String notForTheSource = whyNoSource(db.dataSource());
      if (notForTheSource == null) {
        SourceDemo.run(queen, db.dataSource(), DemoMain::say);
      } else {
        say("source connector skipped: it needs PostgreSQL 17 or later with wal_level=logical; " + notForTheSource);
      }

      queen.status().queues().forEach(qs -> qs.groups().forEach(g -> say("status: queue " + qs.name() + ", "
          + (g.name().equals(Queen.DEFAULT_GROUP) ? "the queue's default group" : "group " + g.name()) + ": lag "
          + g.lag() + ", dead letters " + g.deadLetters())));
      say("done");
    }
  }

  /** Null when the server can run the source connector; else what it lacks. */
  private static String whyNoSource(DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select current_setting('server_version_num')::int,"
            + " current_setting('server_version'), current_setting('wal_level')")) {
      rs.next();
      if (rs.getInt(1) < 170000 || !rs.getString(3).equals("logical")) {
        return "this server is PostgreSQL " + rs.getString(2) + " with wal_level=" + rs.getString(3);
      }
      return null;
    }
  }

  static void say(String line) {
    System.out.println("[demo] " + line);
  }
}
