package io.queen.examples;

import io.queen.PushItem;
import io.queen.Queen;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * The demo's connector step: a queue written into a table by a sink connector, exactly once. The
 * document is the invoices sink of the queen-pgconn README, without a {@code connection}: the sink then writes into Queen's own database
 * through Queen's DataSource, so there is no password to store. The second message for invoice 7 names
 * only {@code id} and {@code total}, so only the total changes.
 */
final class SinkDemo {
  private SinkDemo() {}

  static void run(Queen queen, DataSource ds, Consumer<String> say) throws SQLException, InterruptedException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists invoices (id bigint primary key, customer jsonb, total numeric(12,2),"
          + " customer_tier text generated always as (customer->>'tier') stored, queen_offset bigint)");
    }
    queen.connectors().put("invoices-sink", """
        {"kind": "sink",
         "sink": {"queue": "invoices", "table": "public.invoices", "mode": "upsert",
                  "metadata": {"offset": "queen_offset"}}}""");
    queen.queue("invoices").push(List.of(
        PushItem.of("7", Map.of("id", 7, "customer", Map.of("name", "Ada", "tier", "gold"), "total", "12.50",
            "note", "no column, ignored")),
        PushItem.of("7", Map.of("id", 7, "total", 15)),
        PushItem.of("8", Map.of("id", 8, "customer", Map.of("name", "Linus", "tier", "silver"), "total", 17.5))));
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (true) {
      try (Connection c = ds.getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("select count(*) from invoices where queen_offset is not null"
              + " and (id <> 7 or total = 15)")) {
        rs.next();
        if (rs.getInt(1) == 2) {
          break;
        }
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the sink did not write the invoices within 30 s: " + queen.connectors()
            .status("invoices-sink").map(s -> s.phase() + " " + s.errorCode() + " " + s.error()).orElse("no status"));
      }
      Thread.sleep(100);
    }
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select id, customer, total, customer_tier, queen_offset from invoices order by id")) {
      while (rs.next()) {
        say.accept("sink wrote invoices row: id=" + rs.getLong(1) + " customer=" + rs.getString(2) + " total="
            + rs.getBigDecimal(3) + " customer_tier=" + rs.getString(4) + " (generated) queen_offset=" + rs.getLong(5));
      }
    }
    queen.connectors().status("invoices-sink").ifPresent(s -> say.accept("sink status: phase " + s.phase()
        + ", counters " + s.counters()));
    queen.connectors().delete("invoices-sink");
  }
}
