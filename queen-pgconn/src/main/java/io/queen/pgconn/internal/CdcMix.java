package io.queen.pgconn.internal;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.pgconn.internal.spec.SinkSpec;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.function.Function;

/**
 * The one rule that spans documents: a cdc sink without {@code sourceTable} applies every event of its queue to its
 * one table, so two source tables in that queue would meet on their keys (a delete of one table's row 5 deleting the
 * other's). Refused when the document is put, whichever comes second: such a sink on a queue the stored sources fill
 * from two or more tables, or a source that makes a queue such a sink reads carry two or more tables. And a
 * {@code sourceTable} that no stored source sends to the sink's queue, while some do send it others (a typo would
 * pass over every event). Checked against the stored documents in the put's transaction, under a transaction-level
 * advisory lock that every such put takes; a producer outside the sources is not seen.
 */
final class CdcMix {
  /** Serialises the puts whose documents {@link #refuse} checks against each other. */
  private static final long LOCK = 0x5155_4545_4e00_000aL;

  private CdcMix() {}

  /** Whether a put of this validated document checks the mix of cdc sinks and sources. */
  static boolean applies(Object validated) {
    return validated instanceof SourceSpec || validated instanceof SinkSpec sk && "cdc".equals(sk.mode());
  }

  /** The lock under which puts check the mix, held to the end of the put's transaction. */
  static void lock(Connection c) throws SQLException {
    try (Statement st = c.createStatement()) {
      st.execute("select pg_advisory_xact_lock(" + LOCK + ")");
    }
  }

  /**
   * Throws {@link io.queen.InvalidConnectorException} when putting {@code validated} as {@code name} breaks the rule
   * against the documents stored in {@code table} (read with {@code read}); nothing when the document does not
   * {@link #applies apply}. Takes the lock (again: a transaction's advisory locks stack).
   */
  static void refuse(Connection c, String table, Function<String, JsonNode> read, String name, Object validated)
      throws SQLException {
    if (!applies(validated)) {
      return;
    }
    Map<String, JsonNode> stored = new HashMap<>();
    lock(c);
    try (Statement st = c.createStatement()) {
      try (ResultSet rs = st.executeQuery("select name, document::text from " + table)) {
        while (rs.next()) {
          stored.put(rs.getString(1), read.apply(rs.getString(2)));
        }
      }
    }
    stored.remove(name); // the document being replaced
    List<Object> specs = new ArrayList<>();
    for (var e : stored.entrySet()) {
      try {
        specs.add(DocumentValidator.validate(e.getKey(), e.getValue()));
      } catch (RuntimeException invalid) {
        // a stored document this version no longer reads: it runs nothing, so it mixes nothing
      }
    }
    specs.add(validated);
    Map<String, TreeSet<String>> tablesByQueue = new HashMap<>();
    Map<String, TreeSet<String>> plainCdcSinksByQueue = new HashMap<>();
    for (Object o : specs) {
      if (o instanceof SourceSpec src) {
        for (SourceSpec.Table t : src.tables()) {
          tablesByQueue.computeIfAbsent(t.queue(), k -> new TreeSet<>()).add(t.qualifiedName());
        }
      } else if (o instanceof SinkSpec sk && "cdc".equals(sk.mode()) && sk.sourceTable() == null) {
        plainCdcSinksByQueue.computeIfAbsent(sk.queue(), k -> new TreeSet<>()).add(sk.name());
      }
    }
    if (validated instanceof SinkSpec sk) {
      TreeSet<String> tables = tablesByQueue.getOrDefault(sk.queue(), new TreeSet<>());
      if (sk.sourceTable() == null && tables.size() > 1) {
        throw DocumentValidator.bad("sink.sourceTable", "sink.sourceTable: missing; queue '" + sk.queue()
            + "' carries the changes of " + tables.size() + " tables (" + String.join(", ", tables) + ") and a"
            + " cdc sink applies one table's: name the source table whose events this sink applies");
      }
      if (sk.sourceTable() != null && !tables.isEmpty() && !tables.contains(sk.sourceTable())) {
        throw DocumentValidator.bad("sink.sourceTable", "sink.sourceTable: given \"" + sk.sourceTable() + "\"; the"
            + " sources send queue '" + sk.queue() + "' the changes of " + String.join(", ", tables)
            + " only: name one of them (schema.table, case-sensitive), or put the source that sends it first");
      }
      return;
    }
    for (SourceSpec.Table t : ((SourceSpec) validated).tables()) {
      TreeSet<String> tables = tablesByQueue.get(t.queue());
      TreeSet<String> sinks = plainCdcSinksByQueue.get(t.queue());
      if (sinks != null && tables.size() > 1) {
        throw DocumentValidator.bad("source.tables", "source.tables: queue '" + t.queue() + "' would carry the changes"
            + " of " + String.join(", ", tables) + ", and the cdc sink(s) " + String.join(", ", sinks) + " read it"
            + " without sink.sourceTable: give each table its own queue, or set sourceTable on those sinks first");
      }
    }
  }
}
