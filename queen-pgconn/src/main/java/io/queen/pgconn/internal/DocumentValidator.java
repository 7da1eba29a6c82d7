package io.queen.pgconn.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeType;
import io.queen.InvalidConnectorException;
import io.queen.Names;
import io.queen.pgconn.internal.sink.SqlStatement;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.SinkSpec;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Validates a connector name and document completely, before anything is stored. Every field is known,
 * typed and in range; values outside a range are refused, never adjusted. The first problem found is an
 * {@link InvalidConnectorException} naming the field path, what was given and what is allowed. A password
 * is never echoed.
 */
final class DocumentValidator {
  static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9_-]{0,47}");
  static final Set<String> TOP = Set.of("kind", "enabled", "connection", "sink", "source");
  static final Set<String> CONNECTION = Set.of("host", "port", "database", "user", "password", "sslMode");
  static final Set<String> SINK = Set.of("queue", "table", "mode", "consumerGroup", "subscriptionMode", "workers",
      "batchSize", "maxAttempts", "metadata", "statement", "params", "truncates", "sourceTable");
  static final Set<String> SOURCE = Set.of("tables", "publication", "managePublication", "maxBundleMessages",
      "maxBundleBytes", "snapshotChunkRows", "snapshot", "truncates");
  static final Set<String> SOURCE_TABLE = Set.of("table", "queue", "partitionBy");
  static final List<String> MODES = List.of("append", "upsert", "cdc", "sql");
  static final List<String> SSL = List.of("disable", "require", "verify-full");
  static final List<String> METADATA = List.of("partition", "partitionId", "offset", "transactionId", "createdAt",
      "payload");
  static final Pattern PARAM = Pattern.compile("\\$|\\$(\\.[A-Za-z0-9_]+|\\[\\d{1,9}])+|@partition|@partitionId|@offset"
      + "|@transactionId|@createdAt");

  static final int DEFAULT_PORT = 5432;
  static final String DEFAULT_SSL = "disable";
  static final int DEFAULT_WORKERS = 1;
  static final int MAX_WORKERS = 64;
  static final int DEFAULT_BATCH = 500;
  static final int MAX_BATCH = 10_000;
  static final int DEFAULT_MAX_ATTEMPTS = 3;
  static final int MAX_MAX_ATTEMPTS = 100;

  static final int MAX_TABLES = 100;
  static final int MAX_PARTITION_COLUMNS = 32;
  static final int DEFAULT_BUNDLE_MESSAGES = 1_000;
  static final int MAX_BUNDLE_MESSAGES = 10_000;
  static final int DEFAULT_BUNDLE_BYTES = 4 * 1024 * 1024;
  static final int MIN_BUNDLE_BYTES = 64 * 1024;
  static final int MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
  static final int DEFAULT_CHUNK_ROWS = 2_000;
  static final int MAX_CHUNK_ROWS = 100_000;

  private DocumentValidator() {}

  static void name(String name) {
    if (name == null || !NAME.matcher(name).matches()) {
      throw bad("name", "connector name " + (name == null ? "null" : "'" + printable(name) + "'") + " is invalid: allowed"
          + " are lowercase letters, digits, '-' and '_', 48 characters at most, starting with a letter or a digit");
    }
  }

  /** Validates {@code doc} for connector {@code name}; returns the {@link SinkSpec} or {@link SourceSpec} it describes. */
  static Object validate(String name, JsonNode doc) {
    name(name);
    if (doc == null || !doc.isObject()) {
      throw bad("(document)", "the document must be a JSON object, was " + type(doc));
    }
    unknown(doc, TOP, "");
    String kind = text(doc, "kind", "", true, null);
    if ("source".equals(kind)) {
      return source(name, doc);
    }
    return sink(name, doc);
  }

  /** Validates {@code doc} for connector {@code name}; returns the sink it describes. */
  static SinkSpec sink(String name, JsonNode doc) {
    name(name);
    if (doc == null || !doc.isObject()) {
      throw bad("(document)", "the document must be a JSON object, was " + type(doc));
    }
    unknown(doc, TOP, "");
    String kind = text(doc, "kind", "", true, null);
    if (!"sink".equals(kind)) {
      throw bad("kind", "kind: given " + quoted(kind) + "; allowed are \"sink\" and \"source\"");
    }
    if (doc.has("source")) {
      throw bad("source", "source: a sink document has no \"source\" block; allowed are kind, enabled, connection, sink");
    }
    boolean enabled = bool(doc, "enabled", "", true);
    SinkSpec.Connection conn = null;
    if (doc.has("connection") && !doc.get("connection").isNull()) {
      conn = connection(doc.get("connection"));
    }
    JsonNode s = doc.get("sink");
    if (s == null || s.isNull()) {
      throw bad("sink", "sink: missing; a sink document needs a \"sink\" object with at least queue, table and mode");
    }
    if (!s.isObject()) {
      throw bad("sink", "sink: given " + type(s) + "; allowed is an object");
    }
    unknown(s, SINK, "sink.");
    String queue = text(s, "queue", "sink.", true, null);
    if (!queue.matches(Names.NAME_RULE)) {
      throw bad("sink.queue", "sink.queue: given " + quoted(queue) + "; allowed is a queue name " + Names.NAME_RULE);
    }
    String mode = text(s, "mode", "sink.", true, null);
    if (!MODES.contains(mode)) {
      throw bad("sink.mode", "sink.mode: given " + quoted(mode) + "; allowed are append, upsert, cdc, sql");
    }
    String table = text(s, "table", "sink.", !"sql".equals(mode), null);
    String tSchema = "public";
    String tName = null;
    if (table != null) {
      String[] parts = table.split("\\.", -1);
      if (parts.length > 2 || !Ident.valid(parts[parts.length - 1]) || (parts.length == 2 && !Ident.valid(parts[0]))) {
        throw bad("sink.table", "sink.table: given " + quoted(table) + "; allowed is table or schema.table, each part "
            + Ident.RULE.pattern() + " (written as in SQL without quotes; matching is case-sensitive)");
      }
      if (parts.length == 2) {
        tSchema = parts[0];
      }
      tName = parts[parts.length - 1];
    }
    String group = text(s, "consumerGroup", "sink.", false, "pg-" + name);
    if (!group.matches(Names.NAME_RULE) || group.startsWith("__")) {
      throw bad("sink.consumerGroup", "sink.consumerGroup: given " + quoted(group) + "; allowed is a group name "
          + Names.NAME_RULE + " not starting with '__' (those names belong to Queen)");
    }
    String sub = text(s, "subscriptionMode", "sink.", false, "all");
    Instant from = null;
    if (!sub.equals("all") && !sub.equals("new")) {
      try {
        from = Instant.parse(sub);
      } catch (DateTimeParseException e) {
        throw bad("sink.subscriptionMode", "sink.subscriptionMode: given " + quoted(sub) + "; allowed are \"all\", \"new\""
            + " or an ISO-8601 instant such as \"2026-10-03T06:00:00Z\"");
      }
    }
    int workers = integer(s, "workers", "sink.", DEFAULT_WORKERS, 1, MAX_WORKERS);
    int batch = integer(s, "batchSize", "sink.", DEFAULT_BATCH, 1, MAX_BATCH);
    int maxAttempts = integer(s, "maxAttempts", "sink.", DEFAULT_MAX_ATTEMPTS, 1, MAX_MAX_ATTEMPTS);
    Map<String, String> metadata = new LinkedHashMap<>();
    if (s.has("metadata") && !s.get("metadata").isNull()) {
      JsonNode m = s.get("metadata");
      if (!m.isObject()) {
        throw bad("sink.metadata", "sink.metadata: given " + type(m) + "; allowed is an object such as"
            + " {\"offset\": \"queen_offset\"}");
      }
      for (Iterator<Map.Entry<String, JsonNode>> it = m.fields(); it.hasNext();) {
        Map.Entry<String, JsonNode> e = it.next();
        String path = "sink.metadata." + e.getKey();
        if (!METADATA.contains(e.getKey())) {
          throw bad(path, path + ": unknown field; allowed are " + String.join(", ", METADATA));
        }
        if (!e.getValue().isTextual() || !Ident.valid(e.getValue().asText())) {
          throw bad(path, path + ": given " + (e.getValue().isTextual() ? quoted(e.getValue().asText())
              : type(e.getValue())) + "; allowed is a column name " + Ident.RULE.pattern());
        }
        if (metadata.containsValue(e.getValue().asText())) {
          throw bad(path, path + ": column " + quoted(e.getValue().asText()) + " is already named by another"
              + " metadata field; allowed is one fact per column");
        }
        metadata.put(e.getKey(), e.getValue().asText());
      }
    }
    String statement = text(s, "statement", "sink.", "sql".equals(mode), null);
    List<String> params = new ArrayList<>();
    if (!"sql".equals(mode)) {
      for (String f : List.of("statement", "params")) {
        if (s.has(f)) {
          throw bad("sink." + f, "sink." + f + ": only for mode \"sql\"; this sink's mode is " + quoted(mode));
        }
      }
    } else {
      if (statement.isBlank()) {
        throw bad("sink.statement", "sink.statement: given an empty statement; allowed is one SQL statement with $1..$n");
      }
      JsonNode p = s.get("params");
      if (p != null && !p.isNull()) {
        if (!p.isArray()) {
          throw bad("sink.params", "sink.params: given " + type(p) + "; allowed is an array of paths such as"
              + " [\"$.amount\", \"@offset\"]");
        }
        for (int i = 0; i < p.size(); i++) {
          String path = "sink.params[" + i + "]";
          JsonNode v = p.get(i);
          if (!v.isTextual() || !PARAM.matcher(v.asText()).matches()) {
            throw bad(path, path + ": given " + (v.isTextual() ? quoted(v.asText()) : type(v)) + "; allowed are $, $.a.b,"
                + " $.lines[0] (an index of at most 9 digits), @partition, @partitionId, @offset, @transactionId,"
                + " @createdAt");
          }
          params.add(v.asText());
        }
      }
      List<Integer> used = SqlStatement.parse(statement).binds();
      for (int b : used) {
        if (b < 1 || b == Integer.MAX_VALUE) {
          throw bad("sink.statement", "sink.statement: uses $" + (b == Integer.MAX_VALUE ? "(10 or more digits)" : b)
              + "; allowed are $1..$n with n up to 9 digits, one param per placeholder");
        }
      }
      int highest = SqlStatement.highestPlaceholder(statement);
      if (highest != params.size()) {
        throw bad("sink.params", "sink.params: the statement uses $1..$" + highest + " but " + params.size()
            + " param(s) are given; allowed is exactly one param per placeholder");
      }
    }
    boolean truncates = bool(s, "truncates", "sink.", false);
    if (truncates && !"cdc".equals(mode)) {
      throw bad("sink.truncates", "sink.truncates: only for mode \"cdc\"; this sink's mode is " + quoted(mode));
    }
    if ("sql".equals(mode) && !metadata.isEmpty()) {
      throw bad("sink.metadata", "sink.metadata: not for mode \"sql\" (use @offset, @partition ... in params)");
    }
    String sourceTable = text(s, "sourceTable", "sink.", false, null);
    if (sourceTable != null) {
      if (!"cdc".equals(mode)) {
        throw bad("sink.sourceTable", "sink.sourceTable: only for mode \"cdc\"; this sink's mode is " + quoted(mode));
      }
      String[] parts = sourceTable.split("\\.", -1);
      if (parts.length > 2 || !Ident.valid(parts[parts.length - 1]) || (parts.length == 2 && !Ident.valid(parts[0]))) {
        throw bad("sink.sourceTable", "sink.sourceTable: given " + quoted(sourceTable) + "; allowed is the source's"
            + " schema.table (or table, in public) as its events name it, each part " + Ident.RULE.pattern());
      }
      sourceTable = parts.length == 2 ? sourceTable : "public." + sourceTable;
    }
    return new SinkSpec(name, enabled, conn, queue, tSchema, tName, mode, group, from != null ? "from" : sub, from,
        workers, batch, maxAttempts, Map.copyOf(metadata), statement, List.copyOf(params), truncates, sourceTable);
  }

  /** Validates a {@code kind: "source"} document (the caller checked the name and the top level). */
  static SourceSpec source(String name, JsonNode doc) {
    if (doc.has("sink")) {
      throw bad("sink", "sink: a source document has no \"sink\" block; allowed are kind, enabled, connection, source");
    }
    boolean enabled = bool(doc, "enabled", "", true);
    SinkSpec.Connection conn = null;
    if (doc.has("connection") && !doc.get("connection").isNull()) {
      conn = connection(doc.get("connection"));
    }
    JsonNode s = doc.get("source");
    if (s == null || s.isNull()) {
      throw bad("source", "source: missing; a source document needs a \"source\" object with at least tables");
    }
    if (!s.isObject()) {
      throw bad("source", "source: given " + type(s) + "; allowed is an object");
    }
    unknown(s, SOURCE, "source.");
    JsonNode ts = s.get("tables");
    if (ts == null || ts.isNull()) {
      throw bad("source.tables", "source.tables: missing; it is required (an array of {table, queue, partitionBy})");
    }
    if (!ts.isArray() || ts.isEmpty() || ts.size() > MAX_TABLES) {
      throw bad("source.tables", "source.tables: given " + (ts.isArray() ? "an array of " + ts.size() : type(ts))
          + "; allowed is an array of 1.." + MAX_TABLES + " objects {table, queue, partitionBy}");
    }
    List<SourceSpec.Table> tables = new ArrayList<>();
    for (int i = 0; i < ts.size(); i++) {
      String p = "source.tables[" + i + "].";
      JsonNode t = ts.get(i);
      if (!t.isObject()) {
        throw bad("source.tables[" + i + "]", "source.tables[" + i + "]: given " + type(t) + "; allowed is an object"
            + " {table, queue, partitionBy}");
      }
      unknown(t, SOURCE_TABLE, p);
      String table = text(t, "table", p, true, null);
      String[] parts = table.split("\\.", -1);
      if (parts.length > 2 || !Ident.valid(parts[parts.length - 1]) || (parts.length == 2 && !Ident.valid(parts[0]))) {
        throw bad(p + "table", p + "table: given " + quoted(table) + "; allowed is schema.table (or table, in public),"
            + " each part " + Ident.RULE.pattern() + " (written as in SQL without quotes; matching is case-sensitive)");
      }
      String schema = parts.length == 2 ? parts[0] : "public";
      String tname = parts[parts.length - 1];
      for (SourceSpec.Table seen : tables) {
        if (seen.schema().equals(schema) && seen.table().equals(tname)) {
          throw bad(p + "table", p + "table: " + quoted(schema + "." + tname) + " is listed twice; allowed is each table"
              + " once");
        }
      }
      String queue = text(t, "queue", p, true, null);
      if (!queue.matches(Names.NAME_RULE)) {
        throw bad(p + "queue", p + "queue: given " + quoted(queue) + "; allowed is a queue name " + Names.NAME_RULE);
      }
      List<String> by = new ArrayList<>();
      boolean single = false;
      JsonNode pb = t.get("partitionBy");
      if (pb != null && !pb.isNull()) {
        if (pb.isTextual() && pb.asText().equals("single")) {
          single = true;
        } else if (pb.isArray() && !pb.isEmpty() && pb.size() <= MAX_PARTITION_COLUMNS) {
          for (int j = 0; j < pb.size(); j++) {
            JsonNode c = pb.get(j);
            String cp = p + "partitionBy[" + j + "]";
            if (!c.isTextual() || !Ident.valid(c.asText())) {
              throw bad(cp, cp + ": given " + (c.isTextual() ? quoted(c.asText()) : type(c)) + "; allowed is a column"
                  + " name " + Ident.RULE.pattern());
            }
            if (by.contains(c.asText())) {
              throw bad(cp, cp + ": column " + quoted(c.asText()) + " is named twice; allowed is each column once");
            }
            by.add(c.asText());
          }
        } else {
          throw bad(p + "partitionBy", p + "partitionBy: given " + (pb.isTextual() ? quoted(pb.asText()) : pb.isArray()
              ? "an array of " + pb.size() : type(pb)) + "; allowed is an array of 1.." + MAX_PARTITION_COLUMNS
              + " column names or \"single\" (absent: the row's key)");
        }
      }
      tables.add(new SourceSpec.Table(schema, tname, queue, by, single));
    }
    String publication = text(s, "publication", "source.", false, SourceSpec.derivedName(name));
    if (!Ident.valid(publication)) {
      throw bad("source.publication", "source.publication: given " + quoted(publication) + "; allowed is a publication"
          + " name " + Ident.RULE.pattern());
    }
    boolean manage = bool(s, "managePublication", "source.", true);
    int maxMessages = integer(s, "maxBundleMessages", "source.", DEFAULT_BUNDLE_MESSAGES, 1, MAX_BUNDLE_MESSAGES);
    int maxBytes = integer(s, "maxBundleBytes", "source.", DEFAULT_BUNDLE_BYTES, MIN_BUNDLE_BYTES, MAX_BUNDLE_BYTES);
    int chunk = integer(s, "snapshotChunkRows", "source.", DEFAULT_CHUNK_ROWS, 1, MAX_CHUNK_ROWS);
    String snapshot = text(s, "snapshot", "source.", false, "initial");
    if (!snapshot.equals("initial") && !snapshot.equals("never")) {
      throw bad("source.snapshot", "source.snapshot: given " + quoted(snapshot) + "; allowed are \"initial\" (copy the"
          + " tables first) and \"never\" (stream changes only)");
    }
    boolean truncates = bool(s, "truncates", "source.", false);
    if (truncates) {
      throw bad("source.truncates", "source.truncates: given true; allowed is false: truncates are skipped (and"
          + " counted), since they cannot be ordered against rows spread over many partitions");
    }
    return new SourceSpec(name, enabled, conn, tables, publication, manage, maxMessages, maxBytes, chunk, snapshot,
        false);
  }

  private static SinkSpec.Connection connection(JsonNode c) {
    if (!c.isObject()) {
      throw bad("connection", "connection: given " + type(c) + "; allowed is an object with host, port, database,"
          + " user, password, sslMode (or no connection: Queen's own database)");
    }
    unknown(c, CONNECTION, "connection.");
    String host = text(c, "host", "connection.", true, null);
    // a name, an IPv4 address, or an IPv6 address (bare or in brackets); a "host:port" is refused, the port has
    // its own field
    boolean ipv6 = host.matches("\\[?[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*]?") && host.chars().filter(ch -> ch == ':').count() >= 2;
    if (host.isBlank() || host.length() > 253 || !(host.matches("[A-Za-z0-9._-]+") || ipv6)) {
      throw bad("connection.host", "connection.host: given " + quoted(host) + "; allowed is a host name or an IP address"
          + (host.matches("[A-Za-z0-9._-]+:\\d+") ? " (the port goes in connection.port)" : ""));
    }
    int port = integer(c, "port", "connection.", DEFAULT_PORT, 1, 65535);
    String db = text(c, "database", "connection.", true, null);
    if (db.isEmpty() || db.length() > 63) {
      throw bad("connection.database", "connection.database: given " + quoted(db) + "; allowed is 1..63 characters");
    }
    String user = text(c, "user", "connection.", true, null);
    if (user.isEmpty() || user.length() > 63) {
      throw bad("connection.user", "connection.user: given " + quoted(user) + "; allowed is 1..63 characters");
    }
    boolean hasPassword = false;
    JsonNode pw = c.get("password");
    if (pw != null && !pw.isNull()) {
      if (!pw.isTextual()) {
        throw bad("connection.password", "connection.password: given " + type(pw) + "; allowed is a string");
      }
      hasPassword = true;
    }
    String ssl = text(c, "sslMode", "connection.", false, DEFAULT_SSL);
    if (!SSL.contains(ssl)) {
      throw bad("connection.sslMode", "connection.sslMode: given " + quoted(ssl) + "; allowed are disable, require,"
          + " verify-full");
    }
    return new SinkSpec.Connection(host, port, db, user, hasPassword, ssl);
  }

  private static void unknown(JsonNode o, Set<String> known, String prefix) {
    for (Iterator<String> it = o.fieldNames(); it.hasNext();) {
      String f = it.next();
      if (!known.contains(f)) {
        throw bad(prefix + f, prefix + f + ": unknown field; allowed are " + String.join(", ", new java.util.TreeSet<>(known)));
      }
    }
  }

  private static String text(JsonNode o, String field, String prefix, boolean required, String dflt) {
    JsonNode v = o.get(field);
    if (v == null || v.isNull()) {
      if (required) {
        throw bad(prefix + field, prefix + field + ": missing; it is required");
      }
      return dflt;
    }
    if (!v.isTextual()) {
      throw bad(prefix + field, prefix + field + ": given " + type(v) + "; allowed is a string");
    }
    return v.asText();
  }

  private static boolean bool(JsonNode o, String field, String prefix, boolean dflt) {
    JsonNode v = o.get(field);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.isBoolean()) {
      throw bad(prefix + field, prefix + field + ": given " + type(v) + "; allowed is true or false");
    }
    return v.asBoolean();
  }

  private static int integer(JsonNode o, String field, String prefix, int dflt, int min, int max) {
    JsonNode v = o.get(field);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.isIntegralNumber() || !v.canConvertToLong() || v.asLong() < min || v.asLong() > max) {
      throw bad(prefix + field, prefix + field + ": given " + (v.isNumber() ? v.asText() : type(v)) + "; allowed is an"
          + " integer " + min + ".." + max + " (values outside the range are refused, not adjusted)");
    }
    return v.asInt();
  }

  private static String type(JsonNode v) {
    if (v == null || v.isNull()) {
      return "null";
    }
    JsonNodeType t = v.getNodeType();
    return switch (t) {
      case OBJECT -> "an object";
      case ARRAY -> "an array";
      case STRING -> "a string";
      case NUMBER -> "a number";
      case BOOLEAN -> "a boolean";
      default -> t.name().toLowerCase(java.util.Locale.ROOT);
    };
  }

  private static String quoted(String s) {
    return s == null ? "null" : "\"" + printable(s) + "\"";
  }

  private static String printable(String s) {
    String cut = s.length() > 80 ? s.substring(0, 80) + "…" : s;
    return cut.replaceAll("\\p{Cntrl}", "?");
  }

  static InvalidConnectorException bad(String field, String message) {
    return new InvalidConnectorException(field, message);
  }
}
