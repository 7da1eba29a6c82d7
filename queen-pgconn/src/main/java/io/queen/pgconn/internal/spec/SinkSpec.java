package io.queen.pgconn.internal.spec;

import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * A validated sink document. {@code connection} is null when the sink writes into Queen's own database.
 *
 * @param maxAttempts how many times a refused message is tried, exactly, before it is dead-lettered (see {@code
 *     BatchApply})
 * @param metadata message fact (partition, partitionId, offset, transactionId, createdAt, payload) to column
 * @param sourceTable cdc mode: the only source table ({@code schema.table}) whose events the sink applies; null: all
 */
public record SinkSpec(String name, boolean enabled, Connection connection, String queue, String tableSchema, String table,
    String mode, String consumerGroup, String subscriptionMode, Instant subscriptionFrom, int workers, int batchSize,
    int maxAttempts, Map<String, String> metadata, String statement, List<String> params, boolean truncates,
    String sourceTable) {

  /** Where the target database is. {@code hasPassword}: the document carried one (stored sealed). */
  public record Connection(String host, int port, String database, String user, boolean hasPassword, String sslMode) {
    /** The host as a JDBC URL takes it: an IPv6 address in brackets. */
    public String urlHost() {
      return host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host;
    }
  }

  /** The table as written in SQL: both parts validated and double-quoted. */
  public String qualifiedTable() {
    return Ident.quote(tableSchema) + "." + Ident.quote(table);
  }
}
