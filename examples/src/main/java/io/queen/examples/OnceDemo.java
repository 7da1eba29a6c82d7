package io.queen.examples;

import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * The demo's transaction step: a payment is taken once, by the consume loop. The handler writes the charge
 * into the application's own table on the loop's connection ({@code tx.connection()}), and adds an idempotency
 * marker and the receipt to the loop's transaction; the loop adds the ack and commits all four together. The same
 * payment pushed twice (a producer that retried) is charged once: the second delivery finds the marker, nothing of
 * its bundle commits (its charge row included), and the loop acknowledges it as already done.
 */
final class OnceDemo {
  private OnceDemo() {}

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  static void run(Queen queen, DataSource ds, Consumer<String> say) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists charges (id bigserial primary key, order_id int not null,"
          + " amount_cents int not null)");
    }
    queen.queue("payments").partition("order-42").push(Map.of("order", 42, "amount", 99));
    queen.queue("payments").partition("order-42").push(Map.of("order", 42, "amount", 99)); // the producer retried

    try (Subscription payments = queen.queue("payments").consumer().consumeInTransaction((m, tx) -> {
      int order = m.payload().get("order").asInt();
      try (PreparedStatement st = tx.connection().prepareStatement(
          "insert into charges (order_id, amount_cents) values (?, ?)")) {
        st.setInt(1, order);
        st.setInt(2, m.payload().get("amount").asInt() * 100);
        st.executeUpdate();
      }
      tx.once("charges", "charge:" + order, Kv.ttl(Duration.ofDays(1)).required())
          .push("receipts", m.partition(), Map.of("order", order, "charged", 99));
    })) {
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (payments.acked() + payments.alreadyDone() < 2) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the payments consumer did not finish in 30 s");
        }
        sleep(20);
      }
      say.accept("payment 42 delivered twice: committed " + payments.acked() + " (charge row + marker + receipt + ack in"
          + " one transaction), already done " + payments.alreadyDone() + " (its marker was there: nothing committed, acked)");
    }
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from charges where order_id = 42")) {
      rs.next();
      say.accept("rows in the application's table charges for order 42: " + rs.getInt(1) + " (exactly one)");
    }
    List<Message> receipts = queen.queue("receipts").consumer().batch(10).pop();
    say.accept("receipts queued: " + receipts.size() + " (exactly one)");
    queen.ack(receipts);
  }
}
