package io.queen.examples;

import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The payments example: a {@code sql} sink runs {@code UPDATE accounts SET balance = balance + $1}
 * for every message, in the same transaction as its progress row, so a statement that is not idempotent
 * still runs exactly once per message. Pushes 100 payments over 10 partitions and checks the balances.
 *
 * <pre>
 * mvn -q -B -pl examples exec:java -Dexec.mainClass=io.queen.examples.PaymentsSinkMain
 * </pre>
 */
public final class PaymentsSinkMain {
  private PaymentsSinkMain() {}

  public static void main(String[] args) throws Exception {
    try (Example db = Example.database("payments");
        Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("payments").start()) {
      try (Connection c = db.dataSource().getConnection(); Statement st = c.createStatement()) {
        st.execute("create table if not exists accounts (id bigint primary key, balance numeric(12,2) not null)");
        st.execute("insert into accounts values (1, 0), (2, 0) on conflict do nothing");
      }
      queen.connectors().put("payments-sink", """
          {"kind": "sink",
           "sink": {"queue": "payments", "table": "public.accounts", "mode": "sql",
                    "statement": "UPDATE accounts SET balance = balance + $1::numeric WHERE id = $2::bigint",
                    "params": ["$.amount", "$.accountId"]}}""");
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 100; i++) {
        items.add(PushItem.of("p" + (i % 10), Map.of("accountId", 1 + i % 2, "amount", "1.25")));
      }
      queen.queue("payments").push(items);
      long deadline = System.nanoTime() + 30_000_000_000L;
      String balances = "";
      while (System.nanoTime() < deadline) {
        try (Connection c = db.dataSource().getConnection(); Statement st = c.createStatement();
            ResultSet rs = st.executeQuery("select string_agg(id || '=' || balance, ', ' order by id) from accounts")) {
          rs.next();
          balances = rs.getString(1);
        }
        if (balances.equals("1=62.50, 2=62.50")) {
          break;
        }
        Thread.sleep(100);
      }
      System.out.println("[payments] balances after 100 payments of 1.25: " + balances + " (expected 1=62.50, 2=62.50)");
      queen.connectors().status("payments-sink").ifPresent(s -> System.out.println("[payments] sink status: "
          + s.phase() + " " + s.counters()));
      queen.connectors().delete("payments-sink");
    }
  }
}
