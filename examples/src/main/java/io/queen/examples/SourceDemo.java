package io.queen.examples;

import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Supplier;
import javax.sql.DataSource;

/**
 * The demo's source step, the queen-pgconn README's "Try it" in Java: a table streamed into a queue through logical replication
 * (the two rows already there come from the snapshot as {@code r} events, then an update and a transaction of an
 * insert and a delete), and the queue streamed back into a second table by a {@code cdc} sink. Neither document
 * has a {@code connection}: both connectors use Queen's own database, so there is no password to store. The queue is
 * {@code order-changes} (not {@code orders}, which the demo's first steps already use for order messages).
 */
final class SourceDemo {
  private SourceDemo() {}

  static void run(Queen queen, DataSource ds, Consumer<String> say) throws SQLException, InterruptedException {
    sql(ds, """
        create table orders (
          id         bigint primary key,
          customer   jsonb not null,
          status     text not null,
          total      numeric(12,2) not null,
          created_at timestamptz not null default now())""",
        """
        insert into orders (id, customer, status, total) values
          (1, '{"name": "Ada", "tier": "gold"}', 'new', 42.00),
          (2, '{"name": "Linus", "tier": "silver"}', 'new', 17.50)""");
    queen.connectors().put("orders-src", """
        {"kind": "source",
         "source": {"tables": [{"table": "public.orders", "queue": "order-changes"}]}}""");
    await(() -> queen.connectors().status("orders-src").map(s -> s.phase().equals("streaming")).orElse(false),
        () -> status(queen, "orders-src"), "the source to copy the table and stream");
    say.accept("source status: " + status(queen, "orders-src"));
    for (Message m : read(queen, 2)) {
      say.accept("source pushed " + m.partition() + ": " + m.payload());
    }
    sql(ds, "update orders set status = 'paid' where id = 1",
        "begin; insert into orders (id, customer, status, total) values (3, '{\"name\": \"Grace\", \"tier\": \"gold\"}',"
            + " 'new', 99.90); delete from orders where id = 2; commit");
    for (Message m : read(queen, 3)) {
      say.accept("source pushed " + m.partition() + " (" + m.transactionId() + "): " + m.payload());
    }
    sql(ds, "create table orders_copy (like orders including all)");
    queen.connectors().put("orders-copy", """
        {"kind": "sink",
         "sink": {"queue": "order-changes", "table": "public.orders_copy", "mode": "cdc"}}""");
    await(() -> rows(ds).equals(List.of("1 paid 42.00", "3 new 99.90")), () -> status(queen, "orders-copy"),
        "the cdc sink to copy the table");
    for (String r : rows(ds)) {
      say.accept("cdc sink wrote orders_copy row: " + r);
    }
    // a deleted source drops its replication slot: an orphan slot would pin WAL
    queen.connectors().delete("orders-copy");
    queen.connectors().delete("orders-src");
  }

  private static List<Message> read(Queen queen, int n) throws InterruptedException {
    List<Message> out = new ArrayList<>();
    await(() -> {
      out.addAll(queen.queue("order-changes").group("reader").subscription(SubscriptionMode.ALL).autoAck(true)
          .batch(10).partitions(10).pop());
      return out.size() >= n;
    }, () -> status(queen, "orders-src"), n + " messages from the source");
    return out;
  }

  private static List<String> rows(DataSource ds) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select id, status, total from orders_copy order by id")) {
      while (rs.next()) {
        out.add(rs.getLong(1) + " " + rs.getString(2) + " " + rs.getBigDecimal(3));
      }
    }
    return out;
  }

  private static String status(Queen queen, String name) {
    return queen.connectors().status(name).map(s -> "phase " + s.phase() + (s.pointerLsn() == null ? ""
        : ", pointerLsn " + s.pointerLsn()) + ", counters " + s.counters() + (s.errorCode() == null ? ""
        : ", error " + s.errorCode() + ": " + s.error())).orElse("no status");
  }

  private static void sql(DataSource ds, String... statements) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  private interface Check {
    boolean ok() throws Exception;
  }

  private static void await(Check check, Supplier<String> status, String what) throws InterruptedException {
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (true) {
      try {
        if (check.ok()) {
          return;
        }
      } catch (Exception e) {
        throw new IllegalStateException("waiting for " + what + ": " + e.getMessage(), e);
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("waited 30 s for " + what + "; status: " + status.get());
      }
      Thread.sleep(100);
    }
  }
}
