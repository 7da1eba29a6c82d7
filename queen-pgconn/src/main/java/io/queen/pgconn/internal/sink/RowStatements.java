package io.queen.pgconn.internal.sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.Message;
import io.queen.PayloadTypeException;
import io.queen.PayloadTypes;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.SinkSpec;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How a message becomes a statement on the target, by the sink's mode: the payload read as the node's consumers read
 * it, the row handed to {@code jsonb_populate_record} (append, upsert, cdc), a cdc event's delete or truncate, a sql
 * mode's parameters; and a run of row statements as one statement over a JSON array of rows. The row statements are
 * cached per column shape of the table's shape in use. Safe for the sink's worker threads.
 */
final class RowStatements {
  /** Logs under Sink's logger, the one an operator knows and configures for all of it. */
  private static final Logger LOG = LoggerFactory.getLogger(Sink.class);

  /** A message the mode cannot read: a data error, like a row PostgreSQL refused. */
  static final class DataError extends Exception {
    private static final long serialVersionUID = 1L;

    DataError(String why) {
      super(why);
    }
  }

  /** The parameter of an array statement: its rows (once in each such statement). */
  static final String ROWS_PARAM = "?::jsonb";

  private final ConnectorHost host;
  private final SinkSpec spec;
  private final ObjectMapper mapper;
  /** The node's payload types and upcasters: typed payloads are read as its consumers read them. */
  private final PayloadTypes types;
  /** How many messages the sink instance has applied (a passed-over table is a WARN while none). */
  private final LongSupplier applied;
  private volatile TargetTable table;
  /** The other source tables whose events this instance has passed over (logged once each). */
  private final Set<String> passedOverTables = ConcurrentHashMap.newKeySet();
  /** The row statements per column shape: {one row, a JSON array of rows}. */
  private final Map<String, String[]> rowSql = new ConcurrentHashMap<>();

  RowStatements(ConnectorHost host, SinkSpec spec, LongSupplier applied) {
    this.host = host;
    this.spec = spec;
    this.mapper = host.mapper();
    this.types = host.payloadTypes();
    this.applied = applied;
  }

  /** The table's shape the statements are written for (null for the sql mode). */
  TargetTable table() {
    return table;
  }

  /** Writes the statements for {@code now} from here on (the cached ones were for the shape before). */
  void use(TargetTable now) {
    table = now;
    rowSql.clear();
  }

  /** A run of row statements as one: the array statement and its JSON array of rows. */
  record Rows(String sql, String json) {}

  /**
   * The run's array statement and rows. An upsert whose every row names its whole key is reduced here to the
   * last row per key (in that row's place in the order) and goes through {@code jsonb_populate_recordset} as it
   * is, a quarter less server time than reducing it in SQL; any other run goes as it is to the statement that
   * keeps the array order (and, for an upsert, reduces it).
   */
  static Rows rows(List<Bound> run) {
    Bound first = run.get(0);
    boolean keyed = first.keyedSql != null;
    for (int i = 0; keyed && i < run.size(); i++) {
      keyed = run.get(i).key != null;
    }
    Iterable<String> values;
    if (keyed) {
      Map<String, String> last = new LinkedHashMap<>();
      for (Bound b : run) {
        last.remove(b.key); // the later row wins, in its own place in the order
        last.put(b.key, b.values.get(0));
      }
      values = last.values();
    } else {
      List<String> all = new ArrayList<>(run.size());
      run.forEach(b -> all.add(b.values.get(0)));
      values = all;
    }
    StringBuilder json = new StringBuilder(run.size() * 64).append('[');
    for (String v : values) {
      json.append(json.length() == 1 ? "" : ",").append(v);
    }
    return new Rows(keyed ? first.keyedSql : first.setSql, json.append(']').toString());
  }

  /**
   * A statement and the text values of its parameters; for a row statement ({@code values} is the row's
   * JSON) also {@code setSql}, the same statement over a JSON array of such rows, else null; for an upsert's
   * row also {@code keyedSql}, the statement over an array of rows with distinct keys, and {@code key}, the
   * row's key values (null when one is missing or null: such a row leaves the reduction to SQL).
   */
  record Bound(String sql, List<String> values, String setSql, String keyedSql, String key) {
    Bound(String sql, List<String> values) {
      this(sql, values, null, null, null);
    }

    void set(PreparedStatement st) throws SQLException {
      for (int i = 0; i < values.size(); i++) {
        if (values.get(i) == null) {
          st.setNull(i + 1, Types.OTHER);
        } else {
          st.setObject(i + 1, values.get(i), Types.OTHER);
        }
      }
    }
  }

  Bound bind(Message m) throws DataError {
    JsonNode payload = payload(m);
    return switch (spec.mode()) {
      case "append" -> rowStatement(row(m, payload, payload, Set.of()), false);
      case "upsert" -> rowStatement(row(m, payload, payload, Set.of()), true);
      case "cdc" -> cdc(m, payload);
      default -> sql(m, payload);
    };
  }

  /**
   * The message's payload as the node's consumers read it with a typed class ({@link Message#payload(Class)}): a typed
   * payload of an older version is brought up, on a copy, through the node's upcasters to the newest version of its
   * type the node knows ({@link PayloadTypes#newestVersion}: the builder's {@code payloadType} registrations and
   * upcasters). An untyped payload, one already at that version, and one of a type the node knows nothing of are read
   * as stored. A newer version than the node knows, a missing upcaster or one that throws is a data error whose text
   * names the type and the versions, never the payload.
   */
  private JsonNode payload(Message m) throws DataError {
    String type = m.payloadType();
    int newest = type == null ? 0 : types.newestVersion(type);
    if (newest == 0 || m.payloadVersion() == newest) {
      return m.payload();
    }
    try {
      return types.readable(m.payload(), type, m.payloadVersion(), new PayloadTypes.Type(type, newest), "message "
          + m.id() + " (queue '" + m.queue() + "', partition '" + m.partition() + "', offset " + m.offset() + ")");
    } catch (PayloadTypeException e) {
      if (e.reason() == PayloadTypeException.Reason.NEWER_VERSION) {
        throw new DataError("payload type '" + type + "' version " + m.payloadVersion() + " is newer than version "
            + newest + ", the newest this node knows: give the nodes that run sinks version " + m.payloadVersion()
            + " (payloadType, or the upcaster to it, on the builder), then redrive the dead letter");
      }
      throw new DataError(e.getMessage()); // names the message, the type, the versions and the missing or failed step
    }
  }

  private Bound cdc(Message m, JsonNode e) throws DataError {
    if (!e.isObject() || !e.path("op").isTextual()) {
      throw new DataError("payload is not a change event (an object with op)");
    }
    if (otherTable(e)) {
      String other = e.path("table").asText("(none)");
      if (passedOverTables.size() < 100 && passedOverTables.add(other)) {
        // once per table and sink instance: a sourceTable with a typo passes over every event, quietly otherwise;
        // WARN while the sink has applied nothing of its own table yet (the typo's sign), else INFO
        String line = "{} - sink '{}': passing over the events of table {} in queue '{}' (sink.sourceTable is {});"
            + " they are acknowledged, counted as ignored, and not applied";
        if (applied.getAsLong() == 0) {
          LOG.warn(line, host.nodeId(), spec.name(), other, spec.queue(), spec.sourceTable());
        } else {
          LOG.info(line, host.nodeId(), spec.name(), other, spec.queue(), spec.sourceTable());
        }
      }
      return null; // another source table's event: passed over (counted as ignored)
    }
    String op = e.get("op").asText();
    switch (op) {
      case "c", "r" -> {
        return rowStatement(row(m, e, e.path("after"), Set.of()), true);
      }
      case "u" -> {
        Set<String> unchanged = new java.util.HashSet<>();
        e.path("unchanged").forEach(n -> unchanged.add(n.asText()));
        return rowStatement(row(m, e, e.path("after"), unchanged), true);
      }
      case "d" -> {
        JsonNode key = e.path("key").isObject() ? e.get("key") : e.path("before");
        if (!key.isObject()) {
          throw new DataError("delete event without key");
        }
        List<String> k = table.key();
        StringBuilder cols = new StringBuilder();
        for (String col : k) {
          cols.append(cols.length() == 0 ? "" : ", ").append(Ident.quoteCatalogName(col));
        }
        return new Bound("delete from " + spec.qualifiedTable() + " where (" + cols + ") = (select " + cols
            + " from jsonb_populate_record(null::" + spec.qualifiedTable() + ", ?::jsonb))", List.of(json(key)));
      }
      case "t" -> {
        return spec.truncates() ? new Bound("truncate " + spec.qualifiedTable(), List.of()) : null;
      }
      default -> throw new DataError("change event op is not one of c, r, u, d, t");
    }
  }

  /** A cdc event of a source table other than {@code sourceTable} (when given). */
  private boolean otherTable(JsonNode event) {
    return spec.sourceTable() != null && !spec.sourceTable().equals(event.path("table").asText(null));
  }

  /** A message the cdc mode passes over without writing: another source table's event, a truncate it does not apply. */
  boolean passedOver(Message m) {
    if (!"cdc".equals(spec.mode())) {
      return false;
    }
    JsonNode e;
    try {
      e = payload(m);
    } catch (DataError x) {
      return false;
    }
    return e.isObject() && e.path("op").isTextual()
        && (otherTable(e) || ("t".equals(e.get("op").asText()) && !spec.truncates()));
  }

  /**
   * The object handed to jsonb_populate_record: the columns of {@code source} (the payload as read, or a cdc event's
   * {@code after}), then the metadata columns ({@code payload}: the payload as read).
   */
  private ObjectNode row(Message m, JsonNode payload, JsonNode source, Set<String> leaveAlone) throws DataError {
    ObjectNode row = mapper.createObjectNode();
    if (source.isObject()) {
      for (String col : table.writable()) {
        if (source.has(col) && !leaveAlone.contains(col)) {
          row.set(col, source.get(col));
        }
      }
    } else if (!spec.metadata().containsKey("payload")) {
      throw new DataError("payload is not a JSON object (name a jsonb column in sink.metadata.payload to keep it whole)");
    }
    for (var e : spec.metadata().entrySet()) {
      JsonNode v = switch (e.getKey()) {
        case "partition" -> mapper.getNodeFactory().textNode(m.partition());
        case "partitionId" -> mapper.getNodeFactory().numberNode(m.partitionId());
        case "offset" -> mapper.getNodeFactory().numberNode(m.offset());
        case "transactionId" -> m.transactionId() == null ? mapper.getNodeFactory().nullNode()
            : mapper.getNodeFactory().textNode(m.transactionId());
        case "createdAt" -> mapper.getNodeFactory().textNode(m.createdAt().toString());
        default -> payload;
      };
      row.set(e.getValue(), v);
    }
    if (row.isEmpty()) {
      throw new DataError("the message names no column of the table");
    }
    return row;
  }

  private Bound rowStatement(ObjectNode row, boolean upsert) {
    List<String> cols = new ArrayList<>();
    for (String col : table.writable()) {
      if (row.has(col)) {
        cols.add(Ident.quoteCatalogName(col));
      }
    }
    String shape = String.join(",", cols) + (upsert ? "|u" : "|a"); // the statements are cached per column shape
    String[] sqls = rowSql.computeIfAbsent(shape, k -> rowSql(cols, upsert));
    return new Bound(sqls[0], List.of(json(row)), sqls[1], sqls[2], upsert ? keyOf(row) : null);
  }

  /**
   * The row's key values as one string (each value's JSON text, NUL-separated: a NUL never appears unescaped in
   * JSON text), or null when a key column is missing or null. Two rows whose keys PostgreSQL reads as equal may
   * still differ here ({@code 1} and {@code "1"}): their statement then meets the key twice and fails with 21000,
   * and the batch is applied message by message.
   */
  private String keyOf(ObjectNode row) {
    StringBuilder k = new StringBuilder();
    for (String col : table.key()) {
      JsonNode v = row.get(col);
      if (v == null || v.isNull()) {
        return null;
      }
      k.append(v).append('\u0000');
    }
    return k.toString();
  }

  /**
   * The insert (or upsert) of one row from {@code jsonb_populate_record}, and of a JSON array of rows:
   * for the array, each element populated the same way, in array order; an upsert keeps only the last row
   * per key (a row whose key has a NULL stays on its own, as the unique index would see it), since one
   * {@code insert ... on conflict} cannot touch a row twice. The third, for an upsert only (else null): the
   * upsert of an array whose rows already have distinct keys (reduced by the caller), through
   * {@code jsonb_populate_recordset}.
   */
  private String[] rowSql(List<String> cols, boolean upsert) {
    String t = spec.qualifiedTable();
    String list = String.join(", ", cols);
    List<String> p = new ArrayList<>();
    cols.forEach(col -> p.add("p." + col));
    String one = "insert into " + t + " (" + list + ") select " + list + " from jsonb_populate_record(null::" + t
        + ", ?::jsonb)";
    String from = " from jsonb_array_elements(" + ROWS_PARAM + ") with ordinality e(j, n) cross join lateral"
        + " jsonb_populate_record(null::" + t + ", e.j) p";
    String many;
    String keyed = null;
    if (upsert) {
      List<String> keys = new ArrayList<>();
      table.key().forEach(k -> keys.add(Ident.quoteCatalogName(k)));
      List<String> pk = new ArrayList<>();
      List<String> nulls = new ArrayList<>();
      for (String k : keys) {
        pk.add("p." + k);
        nulls.add("p." + k + " is null");
      }
      String distinct = String.join(", ", pk) + ", (case when " + String.join(" or ", nulls) + " then e.n end)";
      many = "insert into " + t + " (" + list + ") select distinct on (" + distinct + ") " + String.join(", ", p)
          + from + " order by " + distinct + ", e.n desc";
      List<String> sets = new ArrayList<>();
      for (String col : cols) {
        if (!keys.contains(col)) {
          sets.add(col + " = excluded." + col);
        }
      }
      String conflict = " on conflict (" + String.join(", ", keys) + ")"
          + (sets.isEmpty() ? " do nothing" : " do update set " + String.join(", ", sets));
      one += conflict;
      many += conflict;
      keyed = "insert into " + t + " (" + list + ") select " + String.join(", ", p) + " from jsonb_populate_recordset(null::"
          + t + ", " + ROWS_PARAM + ") p" + conflict;
    } else {
      many = "insert into " + t + " (" + list + ") select " + String.join(", ", p) + from + " order by e.n";
    }
    return new String[] {one, many, keyed};
  }

  private Bound sql(Message m, JsonNode payload) {
    SqlStatement st = SqlStatement.parse(spec.statement());
    List<String> values = new ArrayList<>();
    for (int n : st.binds()) {
      values.add(param(m, payload, spec.params().get(n - 1)));
    }
    return new Bound(st.jdbc(), values);
  }

  /**
   * A {@code sql}-mode parameter as text: a path into the payload as read, objects and arrays as their JSON, a
   * missing path as null; or one of the message's own facts.
   */
  String param(Message m, JsonNode payload, String path) {
    switch (path) {
      case "@partition":
        return m.partition();
      case "@partitionId":
        return Long.toString(m.partitionId());
      case "@offset":
        return Long.toString(m.offset());
      case "@transactionId":
        return m.transactionId();
      case "@createdAt":
        return m.createdAt().toString();
      default:
        break;
    }
    JsonNode n = payload;
    java.util.regex.Matcher step = java.util.regex.Pattern.compile("\\.([A-Za-z0-9_]+)|\\[(\\d+)]").matcher(path);
    int at = 1;
    while (at < path.length() && step.find(at) && step.start() == at) {
      n = step.group(1) != null ? n.get(step.group(1)) : n.get(Integer.parseInt(step.group(2)));
      if (n == null) {
        return null;
      }
      at = step.end();
    }
    if (n.isNull() || n.isMissingNode()) {
      return null;
    }
    return n.isContainerNode() ? json(n) : n.asText();
  }

  private String json(JsonNode n) {
    try {
      return mapper.writeValueAsString(n);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("cannot write a JSON tree: " + e.getClass().getName());
    }
  }
}
