package io.queen.pgconn;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.Connectors;
import io.queen.pgconn.internal.Documents;
import java.time.Instant;
import java.util.List;
import java.util.Locale;

/**
 * Typed builders of connector documents, so that Java code need not write JSON text. Each produces exactly
 * the JSON connector document (the fields it was given, nothing added: defaults stay the registry's), and
 * {@code toJson()} / {@code toJsonNode()} / {@code putTo(...)} run the same validation as
 * {@code queen.connectors().put}, so a bad value is refused with the same {@link io.queen.InvalidConnectorException}
 * and field path ({@code sink.workers}). Not thread-safe; a builder may be changed and built again.
 *
 * <pre>{@code
 * PgConnectors.sink("invoices-sink").queue("invoices").table("public.invoices").mode(SinkMode.UPSERT)
 *     .metadata(Metadata.OFFSET, "queen_offset").putTo(queen.connectors());
 * }</pre>
 */
public final class PgConnectors {
  private static final JsonNodeFactory F = JsonNodeFactory.instance;
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private PgConnectors() {}

  /** A sink document for connector {@code name}. */
  public static SinkDocument sink(String name) {
    return new SinkDocument(name);
  }

  /** A source document for connector {@code name}. */
  public static SourceDocument source(String name) {
    return new SourceDocument(name);
  }

  /** A {@code connection} block: the target (or source) database when it is not Queen's own. */
  public static Connection connection(String host, String database, String user) {
    return new Connection().host(host).database(database).user(user);
  }

  /** {@code sink.mode}. */
  public enum SinkMode {
    APPEND, UPSERT, CDC, SQL;

    String json() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  /** {@code connection.sslMode}. */
  public enum SslMode {
    DISABLE("disable"), REQUIRE("require"), VERIFY_FULL("verify-full");

    private final String json;

    SslMode(String json) {
      this.json = json;
    }
  }

  /** The message facts {@code sink.metadata} writes into columns. */
  public enum Metadata {
    PARTITION("partition"), PARTITION_ID("partitionId"), OFFSET("offset"), TRANSACTION_ID("transactionId"),
    CREATED_AT("createdAt"), PAYLOAD("payload");

    private final String json;

    Metadata(String json) {
      this.json = json;
    }
  }

  /** A {@code connection} block; the password goes into the document as given and is sealed by {@code put}. */
  public static final class Connection {
    private final ObjectNode node = F.objectNode();

    private Connection() {}

    public Connection host(String v) {
      node.put("host", v);
      return this;
    }

    public Connection port(int v) {
      node.put("port", v);
      return this;
    }

    public Connection database(String v) {
      node.put("database", v);
      return this;
    }

    public Connection user(String v) {
      node.put("user", v);
      return this;
    }

    public Connection password(String v) {
      node.put("password", v);
      return this;
    }

    public Connection sslMode(SslMode v) {
      node.put("sslMode", v == null ? null : v.json);
      return this;
    }

    /** Never the password: the fields that are set, by name. */
    @Override
    public String toString() {
      List<String> names = new java.util.ArrayList<>();
      node.fieldNames().forEachRemaining(names::add);
      return "Connection" + names;
    }
  }

  /** What the two document builders share: name, kind, {@code enabled}, {@code connection}. */
  public abstract static class Document<B extends Document<B>> {
    final String name;
    final String kind;
    Boolean enabled;
    Connection connection;
    final ObjectNode body = F.objectNode();

    Document(String name, String kind) {
      this.name = name;
      this.kind = kind;
    }

    @SuppressWarnings("unchecked")
    B self() {
      return (B) this;
    }

    /** {@code enabled} (default true). */
    public B enabled(boolean v) {
      enabled = v;
      return self();
    }

    /** {@code connection}; absent: Queen's own database. */
    public B connection(Connection v) {
      connection = v;
      return self();
    }

    /** The connector's name. */
    public String name() {
      return name;
    }

    /** The document as a JSON tree, validated. */
    public ObjectNode toJsonNode() {
      ObjectNode doc = F.objectNode();
      doc.put("kind", kind);
      if (enabled != null) {
        doc.put("enabled", enabled);
      }
      if (connection != null) {
        doc.set("connection", connection.node.deepCopy());
      }
      doc.set(kind, body.deepCopy());
      Documents.validate(name, doc);
      return doc;
    }

    /** The document as JSON text, validated. */
    public String toJson() {
      try {
        return MAPPER.writeValueAsString(toJsonNode());
      } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
        throw new IllegalStateException("cannot write a JSON tree: " + e.getClass().getName());
      }
    }

    /** {@code connectors.put(name(), toJsonNode())}. */
    public void putTo(Connectors connectors) {
      connectors.put(name, toJsonNode());
    }

    /** Never the password: the kind and the name. */
    @Override
    public String toString() {
      return kind + " '" + name + "'";
    }
  }

  /** A sink document ({@code kind: "sink"}); its fields are listed in the module README. */
  public static final class SinkDocument extends Document<SinkDocument> {
    private SinkDocument(String name) {
      super(name, "sink");
    }

    public SinkDocument queue(String v) {
      body.put("queue", v);
      return this;
    }

    /** {@code table} or {@code schema.table}. */
    public SinkDocument table(String v) {
      body.put("table", v);
      return this;
    }

    public SinkDocument mode(SinkMode v) {
      body.put("mode", v == null ? null : v.json());
      return this;
    }

    public SinkDocument consumerGroup(String v) {
      body.put("consumerGroup", v);
      return this;
    }

    /** {@code all} or {@code new}. */
    public SinkDocument subscriptionMode(String v) {
      body.put("subscriptionMode", v);
      return this;
    }

    /** {@code subscriptionMode} as an instant: start at the first message at or after it. */
    public SinkDocument subscriptionFrom(Instant v) {
      body.put("subscriptionMode", v == null ? null : v.toString());
      return this;
    }

    public SinkDocument workers(int v) {
      body.put("workers", v);
      return this;
    }

    public SinkDocument batchSize(int v) {
      body.put("batchSize", v);
      return this;
    }

    /**
     * {@code maxAttempts} (1..100, default 3): how many times a message the target refuses (a data error) is tried
     * before it is dead-lettered, exactly, whether it came alone or in a statement shared with other messages (that
     * statement's refusal counts as one of its tries), on any mix of nodes; the count is kept on the partition's row
     * in {@code queen.sink_progress}. A try whose target transaction never commits (a crash, a lost connection) is
     * not counted. With 1 the sink applies message by message (slower): a message never shares a statement while a
     * refusal there would be its last try.
     */
    public SinkDocument maxAttempts(int v) {
      body.put("maxAttempts", v);
      return this;
    }

    /** One {@code metadata} entry: the message's {@code fact} into {@code column}. */
    public SinkDocument metadata(Metadata fact, String column) {
      ObjectNode m = body.has("metadata") ? (ObjectNode) body.get("metadata") : body.putObject("metadata");
      m.put(fact.json, column);
      return this;
    }

    /** {@code sql} mode's statement, {@code $1..$n}. */
    public SinkDocument statement(String v) {
      body.put("statement", v);
      return this;
    }

    /** {@code sql} mode's params, one per placeholder ({@code $.a.b}, {@code @offset}, ...). */
    public SinkDocument params(String... v) {
      ArrayNode a = body.putArray("params");
      for (String p : v) {
        a.add(p);
      }
      return this;
    }

    /** {@code cdc} mode: apply truncates. */
    public SinkDocument truncates(boolean v) {
      body.put("truncates", v);
      return this;
    }

    /**
     * {@code cdc} mode: apply only the events of this source table ({@code schema.table} as the events name it);
     * the others are passed over and counted as {@code ignored}. Needed when the queue carries several tables.
     */
    public SinkDocument sourceTable(String v) {
      body.put("sourceTable", v);
      return this;
    }
  }

  /** A source document ({@code kind: "source"}); its fields are listed in the module README. */
  public static final class SourceDocument extends Document<SourceDocument> {
    private SourceDocument(String name) {
      super(name, "source");
    }

    private ArrayNode tables() {
      return body.has("tables") ? (ArrayNode) body.get("tables") : body.putArray("tables");
    }

    /** One {@code tables} entry, partitioned by the row's key. */
    public SourceDocument table(String table, String queue) {
      tables().addObject().put("table", table).put("queue", queue);
      return this;
    }

    /** One {@code tables} entry partitioned by these columns. */
    public SourceDocument table(String table, String queue, List<String> partitionBy) {
      ArrayNode by = tables().addObject().put("table", table).put("queue", queue).putArray("partitionBy");
      partitionBy.forEach(by::add);
      return this;
    }

    /** One {@code tables} entry with {@code partitionBy: "single"} (one partition {@code all}). */
    public SourceDocument tableSinglePartition(String table, String queue) {
      tables().addObject().put("table", table).put("queue", queue).put("partitionBy", "single");
      return this;
    }

    public SourceDocument publication(String v) {
      body.put("publication", v);
      return this;
    }

    public SourceDocument managePublication(boolean v) {
      body.put("managePublication", v);
      return this;
    }

    public SourceDocument maxBundleMessages(int v) {
      body.put("maxBundleMessages", v);
      return this;
    }

    public SourceDocument maxBundleBytes(int v) {
      body.put("maxBundleBytes", v);
      return this;
    }

    public SourceDocument snapshotChunkRows(int v) {
      body.put("snapshotChunkRows", v);
      return this;
    }

    /** {@code initial} or {@code never}. */
    public SourceDocument snapshot(String v) {
      body.put("snapshot", v);
      return this;
    }

    public SourceDocument truncates(boolean v) {
      body.put("truncates", v);
      return this;
    }
  }
}
