package io.queen.pgconn.internal.spec;

import java.util.List;

/**
 * A validated source document. {@code connection} is null when the source reads Queen's own database. The
 * slot is always {@code queen_<name>} ({@code -} as {@code _}); the publication defaults to the same name.
 *
 * @param snapshot {@code initial} (copy the tables first) or {@code never}
 * @param truncates always false: truncates are skipped (and counted), because they cannot be
 *     ordered against rows spread over many partitions
 */
public record SourceSpec(String name, boolean enabled, SinkSpec.Connection connection, List<Table> tables,
    String publication, boolean managePublication, int maxBundleMessages, int maxBundleBytes, int snapshotChunkRows,
    String snapshot, boolean truncates) {

  public SourceSpec {
    tables = List.copyOf(tables);
  }

  /**
   * One captured table.
   *
   * @param partitionBy the columns that name a row's partition, or empty for the row's key
   * @param single {@code partitionBy: "single"}: one partition named {@code all}
   */
  public record Table(String schema, String table, String queue, List<String> partitionBy, boolean single) {
    public Table {
      partitionBy = List.copyOf(partitionBy);
    }

    /** {@code schema.table} as change events print it. */
    public String qualifiedName() {
      return schema + "." + table;
    }

    /** Both parts validated and double-quoted. */
    public String sql() {
      return Ident.quote(schema) + "." + Ident.quote(table);
    }
  }

  /** The replication slot: {@code queen_<name>} with {@code -} as {@code _}. */
  public String slot() {
    return derivedName(name);
  }

  /** {@code queen_<name>} with {@code -} as {@code _}: always a valid lower-case identifier (the name rule). */
  public static String derivedName(String connector) {
    return "queen_" + connector.replace('-', '_');
  }

  /** The table for {@code schema.table}, or null. */
  public Table table(String schema, String table) {
    for (Table t : tables) {
      if (t.schema.equals(schema) && t.table.equals(table)) {
        return t;
      }
    }
    return null;
  }

  /** Whether the source copies the tables before it streams. */
  public boolean snapshotFirst() {
    return "initial".equals(snapshot);
  }
}
