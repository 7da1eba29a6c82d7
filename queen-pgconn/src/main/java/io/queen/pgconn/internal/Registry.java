package io.queen.pgconn.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.ConnectorStatus;
import io.queen.Connectors;
import io.queen.InvalidConnectorException;
import io.queen.QueenDatabaseException;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConnectorPlugin;
import io.queen.pgconn.internal.sink.Sink;
import io.queen.pgconn.internal.sink.SinkMeters;
import io.queen.pgconn.internal.source.Source;
import io.queen.pgconn.internal.source.SourceAdmin;
import io.queen.pgconn.internal.source.SourceMeters;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.RuntimeOptions;
import io.queen.pgconn.internal.spec.SinkSpec;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The connector registry of one node: documents in {@code <schema>.connectors} (this module's migration, applied
 * by the node's migrator at start: {@link PgConnProvider#SCHEMA}), re-read every {@code connectorRefresh} on a thread of its own; sinks and sources started,
 * stopped and restarted to match (every node runs every source; its lease decides which one streams). Deleting a
 * source drops its slot, and its publication when managed. Passwords are sealed before they are stored and never returned.
 * The rule that spans documents (cdc sinks and the sources filling their queues) is {@link CdcMix}'s.
 */
final class Registry implements Connectors, ConnectorPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(Registry.class);

  private final ConnectorHost host;
  private final RuntimeOptions options;
  private final ObjectMapper mapper;
  private final String table;
  /** The sequence every put takes its document's version from. */
  private final String versions;
  private final byte[] key;
  private final ScheduledExecutorService executor;
  private final Map<String, Sink> sinks = new ConcurrentHashMap<>();
  private final Map<String, Source> sources = new ConcurrentHashMap<>();
  private final Map<String, ConnectorStatus> failed = new ConcurrentHashMap<>();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final SinkMeters meters;
  private final SourceMeters sourceMeters;

  Registry(ConnectorHost host, RuntimeOptions options) {
    this.host = host;
    this.options = options;
    this.mapper = host.mapper();
    String schema = Ident.quote("Queen's schema", host.schema());
    this.table = schema + ".connectors";
    this.versions = schema + ".connectors_version";
    this.key = host.encryptionKey().orElse(null);
    this.meters = SinkMeters.of(host.meterRegistry());
    this.sourceMeters = SourceMeters.of(host.meterRegistry());
    this.executor = Executors.newScheduledThreadPool(options.threads(), r -> host.newThread("pg", r));
    if (options.run()) {
      long every = options.refresh().toMillis();
      executor.scheduleWithFixedDelay(this::refresh, 0, every, TimeUnit.MILLISECONDS);
    }
  }

  @Override
  public Connectors connectors() {
    return this;
  }

  // ------------------------------------------------------------------------------ the API

  @Override
  public void put(String name, String documentJson) {
    Objects.requireNonNull(documentJson, "documentJson must not be null");
    JsonNode doc;
    try {
      // a key given twice is refused, not settled by the last one (a document edited by hand, a merge gone wrong)
      doc = mapper.reader().with(com.fasterxml.jackson.core.StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .readTree(documentJson);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      DocumentValidator.name(name);
      String twice = e.getOriginalMessage() != null && e.getOriginalMessage().startsWith("Duplicate field")
          ? "a key is given twice in one object (" + e.getOriginalMessage().replaceAll("[^A-Za-z0-9_ '-]", "") + ")"
          : "the document is not valid JSON";
      throw new InvalidConnectorException("(document)", twice + " (line " + e.getLocation().getLineNr() + ", column "
          + e.getLocation().getColumnNr() + ")");
    }
    put(name, doc);
  }

  @Override
  public void put(String name, JsonNode document) {
    Objects.requireNonNull(document, "document must not be null");
    Object validated = DocumentValidator.validate(name, document);
    SinkSpec.Connection conn = validated instanceof SinkSpec sk ? sk.connection() : ((SourceSpec) validated).connection();
    String kind = validated instanceof SinkSpec ? "sink" : "source";
    byte[] sealed = null;
    ObjectNode stored = document.deepCopy();
    if (conn != null && conn.hasPassword()) {
      sealed = Sealer.seal(key, name, document.get("connection").get("password").asText());
    }
    if (stored.get("connection") instanceof ObjectNode c) {
      c.remove("password");
    }
    String json = stored.toString();
    byte[] s = sealed;
    String password = conn != null && conn.hasPassword() ? document.get("connection").get("password").asText() : null;
    boolean changed = sql("put connector", c -> {
      if (CdcMix.applies(validated)) {
        CdcMix.lock(c); // before the row's lock, as every put that checks takes them
      }
      if (sameAsStored(c, name, kind, json, password)) {
        // the same document again (an application that puts its connectors at every start): a new version would
        // restart the connector on every node, with a log line saying it changed; and nothing to refuse
        return false;
      }
      // in the put's transaction, under its lock: two puts cannot both pass
      CdcMix.refuse(c, table, this::read, name, validated);
      // versions come from one sequence, so a document deleted and put again never gets a version a node still
      // runs (a per-row counter restarted at 1, and the other nodes kept running the old document)
      try (PreparedStatement st = c.prepareStatement("insert into " + table + " (name, kind, document, password_sealed,"
          + " version) values (?, ?, ?::jsonb, ?, nextval('" + versions + "')) on conflict (name) do update set"
          + " document = excluded.document, password_sealed = excluded.password_sealed, kind = excluded.kind,"
          + " version = excluded.version, updated_at = now()")) {
        st.setString(1, name);
        st.setString(2, kind);
        st.setString(3, json);
        st.setBytes(4, s);
        st.executeUpdate();
      }
      return true;
    });
    if (!changed) {
      LOG.info("{} - connector '{}' put again unchanged: nothing restarted", host.nodeId(), name);
      return;
    }
    if (validated instanceof SinkSpec spec) {
      LOG.info("{} - connector '{}' stored ({} mode, queue '{}')", host.nodeId(), name, spec.mode(), spec.queue());
    } else {
      SourceSpec spec = (SourceSpec) validated;
      LOG.info("{} - connector '{}' stored (source of {} table(s), slot {})", host.nodeId(), name,
          spec.tables().size(), spec.slot());
      // after the store: a change the running stream meets for a table it does not know makes it check the stored
      // document, which must be the new one by then
      String why = SourceAdmin.publishAddedTables(spec, conn != null && conn.hasPassword()
          ? document.get("connection").get("password").asText() : null, host.dataSource());
      if (why != null) {
        LOG.info("{} - connector '{}': publication {} could not be checked for the tables this document adds ({}); the"
            + " source's owner does it when it runs the document and reports any problem in the status (a table the"
            + " publication lacked until then has its changes streamed from that point)", host.nodeId(), name,
            spec.publication(), why);
      }
    }
  }

  /** SQL: whether the jsonb document {@code doc} is enabled ({@code enabled} left out is true). */
  private static String enabledIn(String doc) {
    return "coalesce((" + doc + " ->> 'enabled')::boolean, true)";
  }

  /**
   * Whether the stored row of {@code name} (locked here until the put's transaction ends) holds this kind, this
   * document (without its password; compared as jsonb values, so key order, spacing and how a number is written
   * do not count, nor an {@code enabled} left out where true is stored, as {@link #setEnabled} writes it) and this
   * password (opened with this node's key; a stored password this node cannot open counts as different).
   */
  private boolean sameAsStored(Connection c, String name, String kind, String documentJson, String password)
      throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select kind = ? and document - 'enabled' = ?::jsonb - 'enabled'"
        + " and " + enabledIn("document") + " = " + enabledIn("?::jsonb") + ", password_sealed from " + table
        + " where name = ? for update")) {
      st.setString(1, kind);
      st.setString(2, documentJson);
      st.setString(3, documentJson);
      st.setString(4, name);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next() || !rs.getBoolean(1)) {
          return false;
        }
        byte[] sealedWas = rs.getBytes(2);
        if (sealedWas == null || password == null) {
          return sealedWas == null && password == null;
        }
        try {
          return password.equals(Sealer.open(key, name, sealedWas));
        } catch (io.queen.ConnectorException e) {
          return false; // sealed under another key: store it again under this one
        }
      }
    }
  }

  @Override
  public Optional<JsonNode> get(String name) {
    Objects.requireNonNull(name, "name must not be null");
    return sql("get connector", c -> {
      try (PreparedStatement st = c.prepareStatement("select document::text from " + table + " where name = ?")) {
        st.setString(1, name);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next() ? Optional.of(read(rs.getString(1))) : Optional.<JsonNode>empty();
        }
      }
    });
  }

  @Override
  public List<String> list() {
    return sql("list connectors", c -> {
      List<String> out = new ArrayList<>();
      try (Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("select name from " + table + " order by name collate \"C\"")) {
        while (rs.next()) {
          out.add(rs.getString(1));
        }
      }
      return out;
    });
  }

  @Override
  public boolean setEnabled(String name, boolean enabled) {
    Objects.requireNonNull(name, "name must not be null");
    // a new version, so every node restarts or stops the connector as it would after a put; none when it is so
    // already (a new version would restart a running connector for nothing)
    boolean[] foundChanged = sql("enable connector", c -> {
      try (PreparedStatement st = c.prepareStatement("with u as (update " + table + " set document = jsonb_set("
          + "document, '{enabled}', to_jsonb(?::boolean)), version = nextval('" + versions + "'), updated_at = now()"
          + " where name = ? and " + enabledIn("document") + " is distinct from ?::boolean"
          + " returning 1) select exists (select 1 from " + table + " where name = ?), exists (select 1 from u)")) {
        st.setBoolean(1, enabled);
        st.setString(2, name);
        st.setBoolean(3, enabled);
        st.setString(4, name);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          return new boolean[] {rs.getBoolean(1), rs.getBoolean(2)};
        }
      }
    });
    if (foundChanged[1]) {
      LOG.info("{} - connector '{}' {}", host.nodeId(), name, enabled ? "enabled" : "disabled");
    }
    return foundChanged[0];
  }

  @Override
  public boolean delete(String name) {
    Objects.requireNonNull(name, "name must not be null");
    Row deleted = sql("delete connector", c -> {
      try (PreparedStatement st = c.prepareStatement("delete from " + table + " where name = ? returning document::text,"
          + " password_sealed, version")) {
        st.setString(1, name);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next() ? new Row(rs.getString(1), rs.getBytes(2), rs.getLong(3)) : null;
        }
      }
    });
    boolean gone = deleted != null;
    if (gone) {
      Sink s = sinks.remove(name);
      if (s != null) {
        s.stop();
      }
      Source src = sources.remove(name);
      if (src != null) {
        src.stop();
        sourceMeters.forget(name); // as the other nodes do when their re-read finds it gone
      }
      try {
        if (DocumentValidator.validate(name, read(deleted.document)) instanceof SourceSpec spec) {
          String password = deleted.sealed == null ? null : Sealer.open(key, name, deleted.sealed);
          SourceAdmin.dropObjects(host, spec, password);
        }
      } catch (RuntimeException e) {
        LOG.warn("{} - source '{}': its slot could not be dropped ({}); drop it by hand, it pins WAL", host.nodeId(),
            name, host.describe(e));
      }
      meters.deleted(name);
      LOG.info("{} - connector '{}' deleted", host.nodeId(), name);
    }
    return gone;
  }

  @Override
  public Optional<ConnectorStatus> status(String name) {
    Objects.requireNonNull(name, "name must not be null");
    Sink s = sinks.get(name);
    if (s != null) {
      return Optional.of(s.status());
    }
    Source src = sources.get(name);
    if (src != null) {
      return Optional.of(src.status());
    }
    ConnectorStatus f = failed.get(name);
    if (f != null) {
      return Optional.of(f);
    }
    // a stored sink this node has not started: "starting" until its next re-read when it would run it here,
    // "disabled" when it is disabled or this node runs no connectors
    return get(name).map(d -> "source".equals(d.path("kind").asText())
        ? SourceAdmin.observed(host, name, d.path("enabled").asBoolean(true))
        : new ConnectorStatus(name, d.path("kind").asText("sink"), d.path("enabled").asBoolean(true)
            && options.run() ? "starting" : "disabled", null, null, Map.of(), null));
  }

  @Override
  public boolean resync(String name) {
    Objects.requireNonNull(name, "name must not be null");
    Optional<JsonNode> doc = get(name);
    if (doc.isEmpty()) {
      return false;
    }
    if (!"source".equals(doc.get().path("kind").asText())) {
      throw new InvalidConnectorException("kind", "connector '" + name + "' is a sink; only a source can be resynced");
    }
    SourceAdmin.requestResync(host, name);
    LOG.info("{} - source '{}': resync asked for (new epoch, slot recreated, new snapshot)", host.nodeId(), name);
    return true;
  }

  @Override
  public List<ConnectorStatus> status() {
    List<ConnectorStatus> out = new ArrayList<>();
    for (String n : list()) {
      status(n).ifPresent(out::add);
    }
    return out;
  }

  // ------------------------------------------------------------------------------ the workers

  /**
   * Every sink that exists, running, paused or failing, keeps its consumer group from being removed as idle: a paused
   * sink resumes where it stopped. A document that does not validate holds nothing.
   */
  private void holdGroups(Map<String, Row> rows) {
    for (var e : rows.entrySet()) {
      try {
        if (DocumentValidator.validate(e.getKey(), read(e.getValue().document)) instanceof SinkSpec sk) {
          host.holdGroup(sk.queue(), sk.consumerGroup());
        }
      } catch (RuntimeException invalid) {
        // its status says why; it consumes nothing
      }
    }
  }

  /** Re-reads every document and makes this node's sinks and sources match. Never throws. */
  void refresh() {
    if (closed.get()) {
      return;
    }
    try {
      Map<String, Row> rows = sql("read connectors", c -> {
        Map<String, Row> out = new TreeMap<>();
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
            "select name, document::text, password_sealed, version from " + table)) {
          while (rs.next()) {
            out.put(rs.getString(1), new Row(rs.getString(2), rs.getBytes(3), rs.getLong(4)));
          }
        }
        return out;
      });
      for (String name : List.copyOf(sinks.keySet())) {
        Row r = rows.get(name);
        Sink running = sinks.get(name); // a delete() on this node may have removed it meanwhile
        if (running != null && (r == null || r.version != running.version())) {
          Sink s = sinks.remove(name);
          if (s == null) {
            continue;
          }
          s.stop();
          if (r == null) {
            meters.deleted(name);
          }
          LOG.info("{} - sink '{}' stopped ({})", host.nodeId(), name, r == null ? "deleted" : "document changed");
        }
      }
      for (String name : List.copyOf(sources.keySet())) {
        Row r = rows.get(name);
        Source running = sources.get(name);
        if (running != null && (r == null || r.version != running.version())) {
          Source s = sources.remove(name);
          if (s == null) {
            continue;
          }
          s.stop();
          sourceMeters.forget(name);
          if (r == null) {
            meters.deleted(name); // its counters too
            s.dropWhatItCreated(); // a slot it made after the deleting node had dropped what was there
          }
          LOG.info("{} - source '{}' stopped ({})", host.nodeId(), name, r == null ? "deleted" : "document changed");
        }
      }
      failed.keySet().retainAll(rows.keySet());
      holdGroups(rows);
      for (var e : rows.entrySet()) {
        if (closed.get()) {
          return;
        }
        String name = e.getKey();
        Row r = e.getValue();
        if (sinks.containsKey(name) || sources.containsKey(name)) {
          Sink s = sinks.get(name);
          if (s != null && s.needsStart()) {
            s.start();
          }
          continue;
        }
        Object spec;
        String password = null;
        String kind = "sink";
        try {
          JsonNode doc = read(r.document);
          kind = doc.path("kind").asText("sink");
          spec = DocumentValidator.validate(name, doc);
          if (r.sealed != null) {
            password = Sealer.open(key, name, r.sealed);
          }
        } catch (io.queen.ConnectorException ce) {
          failed.put(name, new ConnectorStatus(name, kind, "error", ce.code(), ce.getMessage(), Map.of(), null));
          continue;
        } catch (InvalidConnectorException ie) {
          failed.put(name, new ConnectorStatus(name, kind, "error", "invalid_document", ie.getMessage(), Map.of(),
              null));
          continue;
        }
        failed.remove(name);
        if (spec instanceof SinkSpec sinkSpec) {
          Sink s = new Sink(host, options.refresh(), sinkSpec, r.version, password, meters.connector(name));
          sinks.put(name, s);
          if (closed.get()) { // close() began after the check above and may have missed it: not started, stopped here
            sinks.remove(name);
            s.stop();
            return;
          }
          meters.owner(name, () -> {
            Sink now = sinks.get(name);
            return now != null && now.running();
          });
          if (s.needsStart()) {
            s.start();
          }
        } else {
          Source s;
          try {
            long v = r.version;
            s = new Source(host, options, (SourceSpec) spec, v, password, sourceMeters, () -> storedVersion(name) == v);
          } catch (IllegalStateException ise) {
            failed.put(name, new ConnectorStatus(name, "source", "error", "transient", ise.getMessage(), Map.of(), null));
            continue;
          }
          sources.put(name, s);
          if (closed.get()) { // close() began after the check above and may have missed it: never started
            sources.remove(name);
            return;
          }
          meters.owner(name, () -> {
            Source now = sources.get(name);
            return now != null && now.owning();
          });
          s.start();
        }
      }
    } catch (RuntimeException e) {
      LOG.warn("{} - could not re-read the connector documents: {}", host.nodeId(), host.describe(e));
    } catch (Error e) { // thrown out of a scheduled task, it would cancel every later re-read without a word
      LOG.error("{} - the connector re-read failed ({}); trying again at the next one", host.nodeId(), e.toString());
    }
  }

  private record Row(String document, byte[] sealed, long version) {}

  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    executor.shutdown();
    for (Sink s : sinks.values()) {
      s.stop();
    }
    sinks.clear();
    for (Source s : sources.values()) {
      s.stop();
      sourceMeters.forget(s.spec().name());
    }
    sources.clear();
    meters.close();
    try {
      if (!executor.awaitTermination(host.closeGrace().toMillis() + 1_000, TimeUnit.MILLISECONDS)) {
        executor.shutdownNow();
      }
    } catch (InterruptedException e) {
      executor.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  // ------------------------------------------------------------------------------ plumbing

  private JsonNode read(String json) {
    try {
      return mapper.readTree(json);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("stored connector document is not JSON");
    }
  }

  private <T> T sql(String what, ConnectorHost.SqlWork<T> work) {
    try {
      return host.inTransaction(work);
    } catch (QueenDatabaseException e) {
      throw e;
    } catch (RuntimeException e) {
      if (e.getCause() instanceof SQLException se) {
        throw new QueenDatabaseException(what, se.getSQLState(), host.isTransient(se), se);
      }
      throw e;
    }
  }

  /** The stored version of a connector's document, or -1 when it is not stored (deleted). */
  private long storedVersion(String name) {
    return sql("read connector version", c -> {
      try (PreparedStatement st = c.prepareStatement("select version from " + table + " where name = ?")) {
        st.setString(1, name);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next() ? rs.getLong(1) : -1L;
        }
      }
    });
  }
}
