package io.queen.examples;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;

/**
 * The invoices example: an upsert sink maps each message's top-level keys onto the columns of
 * {@code invoices} (a column the message does not name keeps its value; generated columns are derived by
 * PostgreSQL; {@code metadata.offset} writes the message's offset). Runs against {@code QUEEN_JDBC_URL}
 * when set, else an embedded PostgreSQL 17.
 *
 * <pre>
 * mvn -q -B -pl examples exec:java -Dexec.mainClass=io.queen.examples.InvoicesSinkMain
 * </pre>
 */
public final class InvoicesSinkMain {
  private InvoicesSinkMain() {}

  public static void main(String[] args) throws Exception {
    try (Example db = Example.database("invoices");
        Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("invoices").start()) {
      SinkDemo.run(queen, db.dataSource(), line -> System.out.println("[invoices] " + line));
    }
  }
}
