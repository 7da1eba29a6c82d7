package io.queen.pgconn.internal.sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.AckStatus;
import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.PayloadTypeException;
import io.queen.PayloadTypes;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.Transaction;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConsumeSpec;
import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.SinkSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.sql.Types;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One sink on this node: a consume loop of {@code workers} threads, each batch one transaction on the
 * target that locks the batch's progress rows in {@code queen.sink_progress} (in partition-id order),
 * drops every message at or below its partition's last offset, applies the rest, advances the offsets and
 * commits; only then are the messages acknowledged in Queen. A typed payload is read as the node's consumers read
 * it: an older version brought up to the newest the node knows by its upcasters, a newer one a data error. A message
 * PostgreSQL refuses is tried {@code maxAttempts} times and then dead-lettered with the database's error, and its
 * partition goes on; a transient failure is retried with back-off and never counts. A dead letter is recorded in
 * {@code queen.sink_dead_letters} (with the database's message as PostgreSQL wrote it) in the transaction that moves
 * the progress row past it, so a message at or below its row is told apart as applied (dropped) or dead-lettered
 * (tried again: a redrive, or a batch whose dead-letter acknowledgement never reached Queen); Queen's record of it
 * carries the same error with values masked, as the logs do.
 */
public final class Sink {
  private static final Logger LOG = LoggerFactory.getLogger(Sink.class);
  static final String PROGRESS = Ident.quote("queen") + "." + Ident.quote("sink_progress");
  static final String PROGRESS_DDL = """
      create table if not exists queen.sink_progress (
        sink         text        not null,
        partition_id bigint      not null,
        partition    text        not null,
        last_offset  bigint      not null,
        updated_at   timestamptz not null default now(),
        primary key (sink, partition_id))""";
  static final String DEAD = Ident.quote("queen") + "." + Ident.quote("sink_dead_letters");
  /**
   * A dead letter the sink decided in a target transaction (the progress row moved past it there), kept until the
   * message is applied: a batch that comes again because Queen's record of it was lost (a failed ack, a lost lease,
   * a crash) finds it here and dead-letters it again instead of taking it for applied, and a redrive of it is tried.
   * {@code error} is the database's message as PostgreSQL wrote it (values unmasked: it sits beside the data).
   */
  static final String DEAD_DDL = """
      create table if not exists queen.sink_dead_letters (
        sink         text        not null,
        partition_id bigint      not null,
        "offset"     bigint      not null,
        error        text        not null,
        created_at   timestamptz not null default now(),
        primary key (sink, partition_id, "offset"))""";
  /** How many times one batch is retried after transient failures before its leases are given back. */
  static final int TRANSIENT_RETRIES = 8;
  /**
   * The value for {@code idle_in_transaction_session_timeout} in a batch's target transaction (see selectForUpdate):
   * 15 s, or the session's own when that is stricter.
   */
  static final String IDLE_IN_TRANSACTION = "(select case when setting::int between 1 and 14999 then setting"
      + " else '15000' end from pg_settings where name = 'idle_in_transaction_session_timeout')";
  /** The longest a statement on the sink's own connection to a target may wait for an answer (pgjdbc socketTimeout). */
  static final int SOCKET_TIMEOUT_S = 120;
  /** A sql-mode sink: whether the target database has a deferrable constraint (read at start). */
  private volatile boolean anyDeferrable;

  final SinkSpec spec;
  private final long version;
  private final ConnectorHost host;
  private final ObjectMapper mapper;
  /** The node's payload types and upcasters: typed payloads are read as its consumers read them. */
  private final PayloadTypes types;
  private final String password;
  private volatile TargetTable table;
  /** When {@link #table} was read ({@code System.nanoTime()}). */
  private volatile long shapeReadAt;
  /** A statement said the table changed: its shape (and the sink's own tables) are read before the next try. */
  private volatile boolean shapeStale;
  /** The table failed its check while the loop ran: the loop is closing, and the phase says why. */
  private final java.util.concurrent.atomic.AtomicBoolean suspended = new java.util.concurrent.atomic.AtomicBoolean();
  private volatile Subscription sub;
  private volatile String phase = "starting";
  private volatile ErrorCode lastCode;
  private volatile String lastError;
  private volatile Instant lastProgress;
  final AtomicLong applied = new AtomicLong();
  final AtomicLong skipped = new AtomicLong();
  final AtomicLong ignored = new AtomicLong();
  /** The other source tables whose events this instance has passed over (logged once each). */
  private final Set<String> passedOverTables = ConcurrentHashMap.newKeySet();
  final AtomicLong dlq = new AtomicLong();
  final AtomicLong batches = new AtomicLong();
  final AtomicLong errors = new AtomicLong();
  /** Connections to another database, one per worker thread. */
  private final Map<Thread, Connection> external = new ConcurrentHashMap<>();
  private final Map<Connection, Map<String, PreparedStatement>> statements = new ConcurrentHashMap<>();
  /** The row statements per column shape: {one row, a JSON array of rows}. */
  private final Map<String, String[]> rowSql = new ConcurrentHashMap<>();
  private volatile boolean stopped;
  private final SinkMeters.Connector meters;

  Sink(ConnectorHost host, SinkSpec spec, long version, String password) {
    this(host, spec, version, password, SinkMeters.NOOP_CONNECTOR);
  }

  public Sink(ConnectorHost host, SinkSpec spec, long version, String password, SinkMeters.Connector meters) {
    this.meters = meters;
    this.host = host;
    this.spec = spec;
    this.version = version;
    this.password = password;
    this.mapper = host.mapper();
    this.types = host.payloadTypes();
    if (!spec.enabled()) {
      phase = "disabled"; // never started: start() is not called for a disabled document
    }
  }

  // ------------------------------------------------------------------------------ lifecycle

  /** Checks the target and starts the loop; on a failed check the phase is {@code error} (tried again later). */
  public synchronized void start() {
    if (stopped || sub != null) {
      return;
    }
    if (!spec.enabled()) {
      phase = "disabled";
      return;
    }
    try (Connection c = open()) {
      c.setAutoCommit(false);
      ensureProgressTable(c);
      table = spec.table() != null ? TargetTable.check(c, spec) : null;
      shapeReadAt = System.nanoTime();
      shapeStale = false;
      rowSql.clear();
      if ("sql".equals(spec.mode())) {
        // the statement may write any table: checked at once if the database has any deferrable constraint
        try (Statement st = c.createStatement();
            ResultSet rs = st.executeQuery("select exists (select 1 from pg_constraint where condeferrable)")) {
          rs.next();
          anyDeferrable = rs.getBoolean(1);
        }
        try (PreparedStatement st = c.prepareStatement(SqlStatement.parse(spec.statement()).jdbc())) {
          st.getParameterMetaData(); // parses and plans on the server without running it
        } catch (SQLException e) {
          if (host.isTransient(e)) {
            throw e;
          }
          throw new TargetTable.CheckFailed(ErrorCode.STATEMENT_INVALID, "sink.statement (" + host.describe(e) + ")");
        }
      }
      c.commit();
    } catch (TargetTable.CheckFailed e) {
      fail(e.code, e.getMessage());
      return;
    } catch (SQLException e) {
      ErrorCode login = ErrorCode.ofLogin(e, password != null || spec.connection() == null);
      ErrorCode code = login != null ? login : host.isTransient(e) ? ErrorCode.CONNECT_FAILED : ErrorCode.PROGRESS_TABLE;
      fail(code, code.fix() + " (" + host.describe(e) + ")");
      return;
    }
    // the connections of the workers of a loop a failed check stopped: their threads are gone
    external.entrySet().removeIf(e -> {
      if (e.getKey().isAlive()) {
        return false;
      }
      statements.remove(e.getValue());
      closeQuietly(e.getValue());
      return true;
    });
    suspended.set(false);
    SubscriptionMode mode = "new".equals(spec.subscriptionMode()) ? SubscriptionMode.NEW : SubscriptionMode.ALL;
    sub = host.consume(new ConsumeSpec(spec.queue(), spec.consumerGroup(), mode, spec.subscriptionFrom(),
        spec.batchSize(), spec.workers(), null, "pg-" + spec.name(), false), this::handle);
    phase = "running";
    lastCode = null;
    lastError = null;
    LOG.info("{} - sink '{}' running: queue '{}' into {}.{} ({} mode), group '{}', {} worker(s), batch {}", host.nodeId(),
        spec.name(), spec.queue(), spec.tableSchema(), spec.table(), spec.mode(), spec.consumerGroup(), spec.workers(),
        spec.batchSize());
  }

  /** The document version this sink runs (the registry restarts it when the stored one differs). */
  public long version() {
    return version;
  }

  /** Whether {@link #start()} has work to do: not stopped, enabled, and no loop running yet. */
  public boolean needsStart() {
    return !stopped && sub == null && spec.enabled();
  }

  private void fail(ErrorCode code, String why) {
    errors.incrementAndGet();
    meters.error();
    boolean changed = lastCode != code;
    phase = "error";
    lastCode = code;
    lastError = why;
    if (changed) {
      LOG.warn("{} - sink '{}' cannot start ({}): {}", host.nodeId(), spec.name(), code.code(), why);
    }
  }

  /** Stops the consume loop (its leases go back) and closes the connections to the target. */
  public synchronized void stop() {
    stopped = true;
    Subscription s = sub;
    if (s != null) {
      s.close(host.closeGrace());
    }
    for (Connection c : external.values()) {
      closeQuietly(c);
    }
    external.clear();
    statements.clear();
  }

  /** Whether this node is running the sink's work now (the owner gauge). */
  public boolean running() {
    return !stopped && "running".equals(phase);
  }

  /** The status as this node sees it; the counters are this instance's since it started. */
  public ConnectorStatus status() {
    Map<String, Long> counters = new LinkedHashMap<>();
    counters.put("applied", applied.get());
    counters.put("skipped", skipped.get());
    counters.put("ignored", ignored.get());
    counters.put("dlq", dlq.get());
    counters.put("batches", batches.get());
    counters.put("errors", errors.get());
    String ph = phase;
    ErrorCode code = lastCode;
    String why = lastError;
    Subscription s = sub;
    if (code == null && "running".equals(ph) && s != null && s.queueMissing()) {
      // running, but its queue does not exist (nothing pushed yet, or a misspelt name): the phase stays running (a
      // readiness check that waits for it must not wait for a push), the code tells an operator it is not healthy
      code = ErrorCode.QUEUE_MISSING;
      why = "queue '" + spec.queue() + "': " + code.fix();
    }
    return new ConnectorStatus(spec.name(), "sink", ph, code == null ? null : code.code(),
        code == null ? null : why, counters, lastProgress);
  }

  // ------------------------------------------------------------------------------ connections

  private Connection open() throws SQLException {
    SinkSpec.Connection cn = spec.connection();
    if (cn == null) {
      return host.dataSource().getConnection();
    }
    Properties p = new Properties();
    p.setProperty("user", cn.user());
    if (password != null) {
      p.setProperty("password", password);
    }
    p.setProperty("sslmode", cn.sslMode());
    p.setProperty("connectTimeout", "10");
    p.setProperty("loginTimeout", "10");
    // a target that stops answering (host down, a NAT that forgot the connection) must fail the batch, not hang its
    // worker while the loop renews the leases: keepalives find a dead peer, and no statement waits longer than this
    p.setProperty("tcpKeepAlive", "true");
    p.setProperty("socketTimeout", String.valueOf(SOCKET_TIMEOUT_S));
    p.setProperty("ApplicationName", "queen-sink-" + spec.name());
    String url = "jdbc:postgresql://" + cn.urlHost() + ":" + cn.port() + "/" + java.net.URLEncoder.encode(cn.database(),
        java.nio.charset.StandardCharsets.UTF_8);
    try {
      return new org.postgresql.Driver().connect(url, p);
    } catch (SQLException e) {
      throw io.queen.pgconn.internal.spec.ConnectDenied.atConnect(e);
    }
  }

  /** This worker's connection: its own one to another database, or one from Queen's pool per batch. */
  private Connection workerConnection() throws SQLException {
    if (spec.connection() == null) {
      Connection c = open();
      c.setAutoCommit(false);
      return c;
    }
    Connection c = external.get(Thread.currentThread());
    if (c == null || c.isClosed()) {
      c = open();
      c.setAutoCommit(false);
      external.put(Thread.currentThread(), c);
    }
    return c;
  }

  private void release(Connection c, boolean broken) {
    if (spec.connection() == null) {
      statements.remove(c);
      closeQuietly(c);
    } else if (broken) {
      external.remove(Thread.currentThread(), c);
      statements.remove(c);
      closeQuietly(c);
    }
  }

  private static void closeQuietly(Connection c) {
    try {
      c.close();
    } catch (SQLException | RuntimeException e) {
      // closing a broken connection: nothing to do
    }
  }

  private PreparedStatement prepared(Connection c, String sql) throws SQLException {
    Map<String, PreparedStatement> m = statements.computeIfAbsent(c, k -> new HashMap<>());
    PreparedStatement st = m.get(sql);
    if (st == null) {
      st = c.prepareStatement(sql);
      m.put(sql, st);
    }
    return st;
  }

  /**
   * Creates the sink's two tables in the target when missing; pre-created ones are used as they are (CREATE
   * SCHEMA and CREATE TABLE check their privilege even with IF NOT EXISTS, so only what is missing is created).
   */
  static void ensureProgressTable(Connection c) throws SQLException {
    if (missing(c, "select to_regclass('queen.sink_progress') is null or to_regclass('queen.sink_dead_letters') is null")) {
      try (Statement st = c.createStatement()) {
        st.execute("select pg_advisory_xact_lock(" + 0x5155_4545_4e00_0009L + ")");
        if (missing(c, "select to_regnamespace('queen') is null")) {
          st.execute("create schema if not exists queen");
        }
        if (missing(c, "select to_regclass('queen.sink_progress') is null")) {
          st.execute(PROGRESS_DDL);
        }
        if (missing(c, "select to_regclass('queen.sink_dead_letters') is null")) {
          st.execute(DEAD_DDL);
        }
      }
    }
  }

  private static boolean missing(Connection c, String query) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      rs.next();
      return rs.getBoolean(1);
    }
  }

  // ------------------------------------------------------------------------------ one batch

  /** A message the mode cannot read: a data error, like a row PostgreSQL refused. */
  static final class DataError extends Exception {
    private static final long serialVersionUID = 1L;

    DataError(String why) {
      super(why);
    }
  }

  /**
   * A statement over a run of messages that PostgreSQL refused with a data error, and {@code message}, the run's only
   * message when it held one: that refusal is the message's try in this delivery, and it is not run again on its own.
   * Over several messages it is null: PostgreSQL's error does not say which row it refused (nor, inside a transaction,
   * does pgjdbc say which entry of a JDBC batch: it reports every entry failed), so each message then runs on its own
   * to find it, the refused one included.
   */
  static final class Refused extends Exception {
    private static final long serialVersionUID = 1L;
    final transient SQLException error;
    final transient Message message;

    Refused(SQLException error, Message message) {
      super(null, null, false, false);
      this.error = error;
      this.message = message;
    }
  }

  /** Thrown to give leases back without an attempt (the loop does that for any exception). */
  static final class GiveBack extends Exception {
    private static final long serialVersionUID = 1L;

    GiveBack(String why) {
      super(why, null, false, false);
    }
  }

  /** One batch: applied in one target transaction, then what it completed is handed back for the loop to ack. */
  List<Message> handle(List<Message> batch) throws Exception {
    long backoff = 100;
    for (int round = 0; ; round++) {
      Connection c = null;
      try {
        c = workerConnection();
        readShapeIfDue(c);
        Outcome o = apply(c, batch);
        release(c, false);
        return settle(o);
      } catch (TargetTable.CheckFailed e) {
        if (c != null) {
          try {
            c.rollback();
          } catch (SQLException | RuntimeException ignore) {
            // the connection may be gone
          }
          release(c, true);
        }
        suspend(e.code, e.getMessage());
        throw new GiveBack("the table's check failed");
      } catch (SQLException | RuntimeException e) {
        if (c != null) {
          try {
            c.rollback();
          } catch (SQLException | RuntimeException ignore) {
            // the connection may be gone
          }
          release(c, true);
        }
        errors.incrementAndGet();
        meters.error();
        if (stopped || suspended.get() || Thread.currentThread().isInterrupted()) {
          throw new GiveBack("stopping"); // (after a failed check the phase keeps the check's code)
        }
        lastCode = ErrorCode.TRANSIENT; // whatever it was, it is retried and never dead-letters
        lastError = host.describe(e);
        if (e instanceof SQLException se && table != null && shapeError(se)) {
          shapeStale = true; // the table changed under the sink: its shape is read again before the next try
        }
        // one WARN when a batch starts failing and one when it gives up, not one per retry (a database out of
        // disk for a minute made 30 such lines in one episode)
        if (round + 1 >= TRANSIENT_RETRIES) {
          LOG.warn("{} - sink '{}': batch failed {} times ({}); its leases are given back and it comes again; nothing"
              + " is dead-lettered for this", host.nodeId(), spec.name(), TRANSIENT_RETRIES, host.describe(e));
          throw new GiveBack("transient failures");
        }
        if (round == 0) {
          LOG.warn("{} - sink '{}': batch failed ({}), retrying up to {} times, from {} ms apart; nothing is"
              + " dead-lettered for this", host.nodeId(), spec.name(), host.describe(e), TRANSIENT_RETRIES - 1, backoff);
        } else {
          LOG.debug("{} - sink '{}': batch failed ({}), retry {} of {} in {} ms", host.nodeId(), spec.name(),
              host.describe(e), round + 1, TRANSIENT_RETRIES, backoff);
        }
        Thread.sleep(backoff);
        backoff = Math.min(5_000, backoff * 2);
      }
    }
  }

  /**
   * Errors that say the table is not what the sink read at start: a column or the table gone (42703, 42P01), the
   * key the upsert names gone (42P10), a privilege revoked (42501 outside a row's policy check).
   */
  private static boolean shapeError(SQLException e) {
    String st = e.getSQLState();
    return "42703".equals(st) || "42P01".equals(st) || "42P10".equals(st) || "42501".equals(st);
  }

  /**
   * Reads the table's shape again when the last read is older than {@code connectorRefresh} (the cadence at which
   * nodes re-read the documents) or a statement said the table changed: a column added is written from then on,
   * one dropped is no longer named. A table that no longer passes the start check stops the loop (below).
   */
  private void readShapeIfDue(Connection c) throws SQLException {
    TargetTable was = table;
    boolean forced = shapeStale;
    if (was == null || (!forced && System.nanoTime() - shapeReadAt < host.connectorRefresh().toNanos())) {
      return;
    }
    if (forced) {
      try {
        ensureProgressTable(c); // a failure may also have been one of the sink's own tables gone
      } catch (SQLException e) {
        if (host.isTransient(e)) {
          throw e;
        }
        throw new TargetTable.CheckFailed(ErrorCode.PROGRESS_TABLE, host.describe(e));
      }
    }
    TargetTable now = TargetTable.check(c, spec);
    c.commit();
    shapeReadAt = System.nanoTime();
    shapeStale = false;
    if (!now.equals(was)) {
      table = now;
      rowSql.clear();
      LOG.info("{} - sink '{}': table {}.{} changed; writing columns {} (key {}) from now on", host.nodeId(),
          spec.name(), spec.tableSchema(), spec.table(), now.writable(), now.key());
    }
  }

  /**
   * The table no longer passes the start check (dropped, its key or a privilege gone): phase {@code error} with the
   * check's code, the loop stopped (its leases go back); the registry's next re-read starts it again once the check
   * passes.
   */
  private void suspend(ErrorCode code, String why) {
    Subscription s = sub;
    // not synchronized: stop() holds the monitor while it waits for the workers, this one among them
    if (stopped || s == null || !suspended.compareAndSet(false, true)) {
      return;
    }
    fail(code, why);
    sub = null;
    LOG.warn("{} - sink '{}' stopped consuming until its table passes the check again", host.nodeId(), spec.name());
    s.close(host.closeGrace()); // from a worker of its own: the close runs on another thread
  }

  /**
   * What one committed batch did: messages to complete, to dead-letter (with the error), to fail (a refused
   * head with attempts left, with the error: one durable attempt), and held back after a failed one.
   */
  private record Outcome(List<Message> done, Map<Message, String> dead, Map<Message, String> failed,
      List<Message> held) {}

  /**
   * At the start of each of a batch's transactions: a deferred check would fail the COMMIT, past the savepoints that
   * isolate a refused row, and a failed commit reads as transient, so the batch would be retried for good instead of
   * its bad row dead-lettered. Where a deferrable constraint may fire, checks happen at once.
   */
  private void checkConstraintsAtOnce(Connection c) throws SQLException {
    if (table != null ? table.deferrable() : anyDeferrable) {
      try (Statement st = c.createStatement()) {
        st.execute("set constraints all immediate");
      }
    }
  }

  private Outcome apply(Connection c, List<Message> batch) throws SQLException {
    checkConstraintsAtOnce(c);
    TreeMap<Long, List<Message>> byPartition = new TreeMap<>();
    for (Message m : batch) {
      byPartition.computeIfAbsent(m.partitionId(), k -> new ArrayList<>()).add(m);
    }
    Refused refused = null;
    try {
      if (applyFollowing(c, batch, byPartition)) {
        return committed(c, new ArrayList<>(batch), Map.of(), Map.of(), List.of(), 0, 0);
      }
    } catch (Refused r) {
      refused = r; // the batch's one statement was refused: message by message below, never that statement again
    }
    checkConstraintsAtOnce(c); // again: the attempt above may have rolled its transaction back
    Map<Long, Long> last = lockProgress(c, byPartition);
    // at or below the progress row but dead-lettered, not applied: tried again (a redrive, or a batch that comes
    // again because Queen's record of the dead letter was lost)
    Map<Message, String> marked = deadLettered(c, byPartition, last);
    List<Message> fresh = new ArrayList<>();
    for (Message m : batch) {
      if (m.offset() > last.get(m.partitionId())) {
        fresh.add(m);
      }
    }
    Map<Message, String> dead = new LinkedHashMap<>();
    Map<Message, String> failed = new LinkedHashMap<>();
    List<Message> held = new ArrayList<>();
    Map<Long, Long> advance = new HashMap<>();
    // a message refused before (attempt > 1: for the sink's group only a FAILED ack counts) goes message by
    // message at once rather than failing the batch's one statement again; so does a dead-lettered one tried again,
    // and a batch whose one statement was just refused (run again, it would only run the refused row once more)
    boolean oneByOne = refused != null || !marked.isEmpty() || fresh.stream().anyMatch(m -> m.attempt() > 1);
    boolean fast = !oneByOne;
    for (Message m : fresh) {
      advance.merge(m.partitionId(), m.offset(), Math::max);
    }
    try {
      if (fast && runFast(c, fresh, advance)) {
        advance.clear(); // advanced by the last statement
      }
    } catch (Refused r) {
      refused = r;
      fast = false;
    } catch (DataError e) {
      fast = false;
    }
    List<Message> unmark = new ArrayList<>();
    Map<Message, String> mark = new LinkedHashMap<>();
    if (!fast) {
      advance.clear();
      if (!oneByOne) {
        c.rollback(); // the locks go too: take them again and apply message by message
        checkConstraintsAtOnce(c);
        last = lockProgress(c, byPartition);
        marked = deadLettered(c, byPartition, last);
      }
      for (List<Message> part : byPartition.values()) {
        for (int i = 0; i < part.size(); i++) {
          Message m = part.get(i);
          boolean below = m.offset() <= last.get(m.partitionId());
          if (below && !marked.containsKey(m)) {
            continue;
          }
          if (below && i + 1 < part.size() && part.get(i + 1).offset() <= last.get(m.partitionId())) {
            // with messages after it that were applied: a batch that comes again because Queen's record of the dead
            // letter was lost, not a redrive (delivered alone); applied now, it would land after them
            dead.put(m, gaveUp(m.attempt()) + masked(marked.get(m)));
            continue;
          }
          Exception e = null;
          if (refused != null && refused.message == m && !below) {
            e = refused.error; // this delivery's try of it: its refusal by the statement that held it
          } else {
            Savepoint sp = c.setSavepoint();
            try {
              applyOne(c, m);
              c.releaseSavepoint(sp);
              if (below) {
                unmark.add(m); // applied at last: no longer a dead letter of this sink; the row stays where it is
              } else {
                advance.merge(m.partitionId(), m.offset(), Math::max);
              }
              continue;
            } catch (SQLException | DataError x) {
              if (x instanceof SQLException se && !isDataError(se)) {
                throw se;
              }
              c.rollback(sp);
              e = x;
            }
          }
          // the durable count: the cursor's attempts on this head, shared by all nodes, plus this one
          int n = m.attempt();
          String why = errorText(e); // for Queen and the logs: the names of the objects, values masked
          if (n >= spec.maxAttempts()) {
            dead.put(m, gaveUp(n) + why);
            mark.put(m, databaseError(e)); // in the target, beside the data: as PostgreSQL wrote it
            if (!below) {
              advance.merge(m.partitionId(), m.offset(), Math::max);
            }
            LOG.warn("{} - sink '{}': partition '{}' offset {} refused {} time(s), dead-lettered: {}", host.nodeId(),
                spec.name(), m.partition(), m.offset(), n, why);
          } else {
            LOG.warn("{} - sink '{}': partition '{}' offset {} refused (attempt {} of {}): {}", host.nodeId(),
                spec.name(), m.partition(), m.offset(), n, spec.maxAttempts(), why);
            failed.put(m, "sink '" + spec.name() + "' attempt " + n + " of " + spec.maxAttempts() + " refused: " + why);
            held.addAll(part.subList(i + 1, part.size()));
            break;
          }
        }
      }
    }
    List<Message> done = new ArrayList<>();
    int skippedHere = 0;
    int ignoredHere = 0;
    for (Message m : batch) {
      if (!dead.containsKey(m) && !failed.containsKey(m) && !held.contains(m)) {
        done.add(m);
        if (m.offset() <= last.get(m.partitionId()) && !marked.containsKey(m)) {
          skippedHere++;
        } else if (passedOver(m)) {
          ignoredHere++;
        }
      }
    }
    if (!advance.isEmpty()) {
      // cached per connection like every statement here: never closed by this code (a worker's own connection
      // serves batch after batch; closing it here broke every next batch on that connection once)
      PreparedStatement st = prepared(c, ADVANCE);
      bindAdvance(c, st, advance);
      st.executeUpdate();
    }
    recordDeadLetters(c, mark, unmark);
    return committed(c, done, dead, failed, held, skippedHere, ignoredHere);
  }

  /** How the reason of the sink's {@code DEAD_LETTER} ack in Queen begins. */
  private String gaveUp(int attempts) {
    return "sink '" + spec.name() + "' gave up after " + attempts + " attempt(s): ";
  }

  /** A quoted name or value in the primary message of PostgreSQL's error. */
  private static final java.util.regex.Pattern QUOTED = java.util.regex.Pattern.compile("\"[^\"]*\"|'[^']*'");

  /** The SQLState {@link #databaseError} ends with. */
  private static final java.util.regex.Pattern SQLSTATE = java.util.regex.Pattern.compile("; SQLState (\\w{5})$");

  /**
   * A dead letter's error as the target keeps it ({@link #databaseError}), for Queen's record made again from it: the
   * node's rule for Queen's records and logs ({@link ConnectorHost#describe}), quoted text masked in the messages of
   * classes 22 and 23, which may quote a value; the names PostgreSQL reports follow unquoted and stay.
   */
  static String masked(String targetError) {
    java.util.regex.Matcher st = SQLSTATE.matcher(targetError);
    if (st.find() && (st.group(1).startsWith("22") || st.group(1).startsWith("23"))) {
      return QUOTED.matcher(targetError).replaceAll("\"…\"");
    }
    return targetError;
  }

  /**
   * The batch's messages at or below their partition's progress row that this sink dead-lettered rather than
   * applied ({@code queen.sink_dead_letters}); looked up only when the batch has any message at or below its row.
   */
  private Map<Message, String> deadLettered(Connection c, Map<Long, List<Message>> byPartition, Map<Long, Long> last)
      throws SQLException {
    List<Object> pids = new ArrayList<>();
    List<Object> offsets = new ArrayList<>();
    for (var e : byPartition.entrySet()) {
      for (Message m : e.getValue()) {
        if (m.offset() <= last.get(e.getKey())) {
          pids.add(m.partitionId());
          offsets.add(m.offset());
        }
      }
    }
    if (pids.isEmpty()) {
      return Map.of();
    }
    PreparedStatement st = prepared(c, "select d.partition_id, d.\"offset\", d.error from " + DEAD + " d"
        + " join unnest(?::bigint[], ?::bigint[]) v(pid, o) on d.partition_id = v.pid and d.\"offset\" = v.o"
        + " where d.sink = ?");
    st.setArray(1, c.createArrayOf("bigint", pids.toArray()));
    st.setArray(2, c.createArrayOf("bigint", offsets.toArray()));
    st.setString(3, spec.name());
    Map<String, String> found = new HashMap<>();
    try (ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        found.put(rs.getLong(1) + "/" + rs.getLong(2), rs.getString(3));
      }
    }
    Map<Message, String> out = new HashMap<>();
    if (found.isEmpty()) {
      return out;
    }
    for (List<Message> part : byPartition.values()) {
      for (Message m : part) {
        String error = found.get(m.partitionId() + "/" + m.offset());
        if (error != null) {
          out.put(m, error);
        }
      }
    }
    return out;
  }

  /** In the batch's target transaction: what it dead-lettered is recorded, what it applied at last is not any more. */
  private void recordDeadLetters(Connection c, Map<Message, String> mark, List<Message> unmark) throws SQLException {
    if (!mark.isEmpty()) {
      List<Object> pids = new ArrayList<>();
      List<Object> offsets = new ArrayList<>();
      List<Object> errors = new ArrayList<>();
      for (var e : mark.entrySet()) {
        pids.add(e.getKey().partitionId());
        offsets.add(e.getKey().offset());
        errors.add(e.getValue());
      }
      PreparedStatement st = prepared(c, "insert into " + DEAD + " (sink, partition_id, \"offset\", error)"
          + " select ?, v.pid, v.o, v.e from unnest(?::bigint[], ?::bigint[], ?::text[]) v(pid, o, e)"
          + " on conflict (sink, partition_id, \"offset\") do update set error = excluded.error, created_at = now()");
      st.setString(1, spec.name());
      st.setArray(2, c.createArrayOf("bigint", pids.toArray()));
      st.setArray(3, c.createArrayOf("bigint", offsets.toArray()));
      st.setArray(4, c.createArrayOf("text", errors.toArray()));
      st.executeUpdate();
    }
    if (!unmark.isEmpty()) {
      List<Object> pids = new ArrayList<>();
      List<Object> offsets = new ArrayList<>();
      for (Message m : unmark) {
        pids.add(m.partitionId());
        offsets.add(m.offset());
      }
      PreparedStatement st = prepared(c, "delete from " + DEAD + " d using unnest(?::bigint[], ?::bigint[]) v(pid, o)"
          + " where d.sink = ? and d.partition_id = v.pid and d.\"offset\" = v.o");
      st.setArray(1, c.createArrayOf("bigint", pids.toArray()));
      st.setArray(2, c.createArrayOf("bigint", offsets.toArray()));
      st.setString(3, spec.name());
      st.executeUpdate();
    }
  }

  /** Commits the batch's target transaction and counts what it did. */
  private Outcome committed(Connection c, List<Message> done, Map<Message, String> dead, Map<Message, String> failed,
      List<Message> held, int skippedHere, int ignoredHere) throws SQLException {
    c.commit();
    int appliedHere = done.size() - skippedHere - ignoredHere;
    applied.addAndGet(appliedHere);
    skipped.addAndGet(skippedHere);
    ignored.addAndGet(ignoredHere);
    meters.ignored(ignoredHere);
    batches.incrementAndGet();
    meters.applied(appliedHere);
    meters.skipped(skippedHere);
    meters.batch();
    lastProgress = Instant.now();
    if ("running".equals(phase) || lastCode == ErrorCode.TRANSIENT) {
      lastCode = null;
      lastError = null;
    }
    return new Outcome(done, dead, failed, held);
  }

  /**
   * The common batch in one statement: every message a first delivery and read by one row statement. The
   * statement moves each partition's progress row to the batch's last offset of that partition only where the
   * row is below the batch's first offset of that partition (nothing of the batch was applied before), creates
   * the rows of partitions seen for the first time, and writes the rows only when every partition's row moved
   * or was created; it answers how many did. A row another node moved meanwhile is re-read by PostgreSQL after
   * that node's commit and no longer qualifies; a row created meanwhile is left alone. When not every partition
   * qualified (a batch applied before whose ack never reached Queen, a race), the statement wrote nothing that
   * stays: the transaction is rolled back here and the batch goes the general way (lock the progress rows, drop
   * what is done, apply). Returns whether the batch was applied (not committed yet).
   *
   * @throws Refused when PostgreSQL refused a row (rolled back here): the general way applies the batch message by
   *     message, without this statement
   */
  private boolean applyFollowing(Connection c, List<Message> batch, Map<Long, List<Message>> byPartition)
      throws SQLException, Refused {
    if (batch.stream().anyMatch(m -> m.attempt() > 1)) {
      return false;
    }
    List<Bound> run = new ArrayList<>(batch.size());
    try {
      for (Message m : batch) {
        Bound b = bind(m);
        if (b == null || b.setSql == null || (!run.isEmpty() && !run.get(0).sql.equals(b.sql))) {
          return false;
        }
        run.add(b);
      }
    } catch (DataError e) {
      return false; // found again on the general way, message by message
    }
    int k = byPartition.size();
    Long[] pids = new Long[k];
    String[] names = new String[k];
    Long[] first = new Long[k];
    Long[] last = new Long[k];
    int i = 0;
    for (var e : byPartition.entrySet()) {
      List<Message> part = e.getValue();
      pids[i] = e.getKey();
      names[i] = part.get(0).partition();
      first[i] = part.get(0).offset();
      last[i] = part.get(part.size() - 1).offset();
      i++;
    }
    Rows rows = rows(run);
    PreparedStatement st = prepared(c, "with v as (select * from unnest(?::bigint[], ?::text[], ?::bigint[],"
        + " ?::bigint[]) v(pid, name, first, o)), advance as (update " + PROGRESS + " p set last_offset = v.o,"
        + " updated_at = now() from v where p.sink = ? and p.partition_id = v.pid and p.last_offset < v.first"
        + " returning 1), created as (insert into " + PROGRESS + " (sink, partition_id, partition, last_offset)"
        + " select ?, v.pid, v.name, v.o from v where not exists (select 1 from " + PROGRESS + " p where p.sink = ?"
        + " and p.partition_id = v.pid) order by v.pid on conflict (sink, partition_id) do nothing returning 1),"
        + " moved as (select (select count(*) from advance) + (select count(*) from created) as n), applied as ("
        + rows.sql.replace(ROWS_PARAM, "(select case when moved.n = ? then ?::jsonb else '[]'::jsonb end from moved)")
        + " returning 1) select moved.n, (select count(*) from applied), set_config("
        + "'idle_in_transaction_session_timeout', " + IDLE_IN_TRANSACTION + ", true) from moved"); // selectForUpdate
    st.setArray(1, c.createArrayOf("bigint", pids));
    st.setArray(2, c.createArrayOf("text", names));
    st.setArray(3, c.createArrayOf("bigint", first));
    st.setArray(4, c.createArrayOf("bigint", last));
    st.setString(5, spec.name());
    st.setString(6, spec.name());
    st.setString(7, spec.name());
    st.setInt(8, k);
    st.setObject(9, rows.json, Types.OTHER);
    int moved;
    try (ResultSet rs = st.executeQuery()) {
      rs.next();
      moved = rs.getInt(1);
    } catch (SQLException e) {
      // 21000 (a data error too): rows of one statement met on one key of a unique index the reduction did not see
      // as one key (NULLS NOT DISTINCT); one message at a time cannot meet that
      if (!isDataError(e)) {
        throw e;
      }
      c.rollback();
      throw new Refused(e, batch.size() == 1 ? batch.get(0) : null); // the general way finds it, message by message
    }
    if (moved != k) {
      c.rollback();
      return false;
    }
    return true;
  }

  /** The parameter of an array statement: its rows (once in each such statement). */
  private static final String ROWS_PARAM = "?::jsonb";

  /** Moves the offsets of the batch's partitions: (partition ids, last offsets, sink). */
  private static final String ADVANCE = "update " + PROGRESS + " p set last_offset = v.o, updated_at = now()"
      + " from unnest(?::bigint[], ?::bigint[]) v(pid, o) where p.sink = ? and p.partition_id = v.pid";

  private void bindAdvance(Connection c, PreparedStatement st, Map<Long, Long> advance) throws SQLException {
    st.setArray(1, c.createArrayOf("bigint", advance.keySet().toArray()));
    st.setArray(2, c.createArrayOf("bigint", advance.values().toArray()));
    st.setString(3, spec.name());
  }

  /**
   * Locks the batch's progress rows in partition-id order and returns their last offsets. The rows exist
   * after a partition's first batch, so that is one statement; the missing ones are created (at -1) and
   * locked after, in partition-id order too. Two transactions creating rows for the same new partitions at
   * once may deadlock: a transient failure, retried like any.
   */
  private Map<Long, Long> lockProgress(Connection c, TreeMap<Long, List<Message>> byPartition) throws SQLException {
    Map<Long, Long> last = selectForUpdate(c, byPartition.keySet().toArray());
    if (last.size() == byPartition.size()) {
      return last;
    }
    List<Object> pids = new ArrayList<>();
    List<Object> names = new ArrayList<>();
    for (var e : byPartition.entrySet()) {
      if (!last.containsKey(e.getKey())) {
        pids.add(e.getKey());
        names.add(e.getValue().get(0).partition());
      }
    }
    PreparedStatement ins = prepared(c, "insert into " + PROGRESS + " (sink, partition_id, partition, last_offset)"
        + " select ?, v.pid, v.p, -1 from unnest(?::bigint[], ?::text[]) v(pid, p) order by v.pid"
        + " on conflict (sink, partition_id) do nothing");
    ins.setString(1, spec.name());
    ins.setArray(2, c.createArrayOf("bigint", pids.toArray()));
    ins.setArray(3, c.createArrayOf("text", names.toArray()));
    ins.executeUpdate();
    last.putAll(selectForUpdate(c, pids.toArray()));
    return last;
  }

  /**
   * Locks the batch's progress rows, and bounds how long this transaction may then sit idle: a worker whose process
   * is paused (a long GC, a frozen VM) mid-batch would otherwise hold these row locks until it goes on, and every
   * node that took its partitions over would wait on them, without bound. PostgreSQL ends such a session after
   * 15 s ({@link #IDLE_IN_TRANSACTION}); its transaction rolls back and the new holder goes on. A working worker's statements
   * follow each other within milliseconds. {@code set_config(..., true)} lasts the transaction only, so a pooled
   * connection goes back as it came.
   */
  private Map<Long, Long> selectForUpdate(Connection c, Object[] pids) throws SQLException {
    PreparedStatement sel = prepared(c, "select partition_id, last_offset, set_config("
        + "'idle_in_transaction_session_timeout', " + IDLE_IN_TRANSACTION + ", true) from " + PROGRESS
        + " where sink = ? and partition_id = any(?::bigint[]) order by partition_id for update");
    sel.setString(1, spec.name());
    sel.setArray(2, c.createArrayOf("bigint", pids));
    Map<Long, Long> last = new HashMap<>();
    try (ResultSet rs = sel.executeQuery()) {
      while (rs.next()) {
        last.put(rs.getLong(1), rs.getLong(2));
      }
    }
    return last;
  }

  /**
   * Applies in order. Consecutive messages with the same statement go together: a row statement (append,
   * upsert, cdc's inserts and updates) as ONE statement over a JSON array of the rows, reduced to the last
   * row per key for an upsert (what applying them one after the other leaves); any other as one JDBC batch.
   * When the last run is a row statement it also moves the progress rows to {@code advance} (one statement,
   * one round trip less): returns whether it did.
   */
  private boolean runFast(Connection c, List<Message> fresh, Map<Long, Long> advance)
      throws SQLException, DataError, Refused {
    List<Bound> run = new ArrayList<>();
    List<Message> of = new ArrayList<>();
    for (Message m : fresh) {
      Bound b = bind(m);
      if (b == null) {
        continue; // nothing to do for this message (a skipped truncate)
      }
      if (!run.isEmpty() && !run.get(0).sql.equals(b.sql)) {
        flush(c, run, of, null);
      }
      run.add(b);
      of.add(m);
    }
    return flush(c, run, of, advance);
  }

  /**
   * Runs a run of messages with the same statement ({@code of}: their messages), and empties both; a row statement
   * also advances the progress rows when {@code advance} is given (returns whether it did).
   *
   * @throws Refused when PostgreSQL refused a row, naming its message when the run says which (see {@link Refused})
   */
  private boolean flush(Connection c, List<Bound> run, List<Message> of, Map<Long, Long> advance)
      throws SQLException, Refused {
    if (run.isEmpty()) {
      return false;
    }
    Bound first = run.get(0);
    boolean advanced = false;
    try {
      if (first.setSql != null) {
        Rows rows = rows(run);
        advanced = advance != null && !advance.isEmpty();
        PreparedStatement st = prepared(c, advanced ? "with advance as (" + ADVANCE + ") " + rows.sql : rows.sql);
        if (advanced) {
          bindAdvance(c, st, advance);
        }
        st.setObject(advanced ? 4 : 1, rows.json, Types.OTHER);
        st.executeUpdate();
      } else {
        PreparedStatement st = prepared(c, first.sql);
        for (Bound b : run) {
          b.set(st);
          st.addBatch();
        }
        st.executeBatch();
      }
    } catch (SQLException e) {
      if (!isDataError(e)) {
        throw e;
      }
      throw new Refused(e, of.size() == 1 ? of.get(0) : null);
    }
    run.clear();
    of.clear();
    return advanced;
  }

  /** A run of row statements as one: the array statement and its JSON array of rows. */
  private record Rows(String sql, String json) {}

  /**
   * The run's array statement and rows. An upsert whose every row names its whole key is reduced here to the
   * last row per key (in that row's place in the order) and goes through {@code jsonb_populate_recordset} as it
   * is, a quarter less server time than reducing it in SQL; any other run goes as it is to the statement that
   * keeps the array order (and, for an upsert, reduces it).
   */
  private static Rows rows(List<Bound> run) {
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

  private void applyOne(Connection c, Message m) throws SQLException, DataError {
    Bound b = bind(m);
    if (b == null) {
      return;
    }
    PreparedStatement st = prepared(c, b.sql);
    b.set(st);
    st.execute();
  }

  /**
   * A statement and the text values of its parameters; for a row statement ({@code values} is the row's
   * JSON) also {@code setSql}, the same statement over a JSON array of such rows, else null; for an upsert's
   * row also {@code keyedSql}, the statement over an array of rows with distinct keys, and {@code key}, the
   * row's key values (null when one is missing or null: such a row leaves the reduction to SQL).
   */
  private record Bound(String sql, List<String> values, String setSql, String keyedSql, String key) {
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

  private Bound bind(Message m) throws DataError {
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
        if (applied.get() == 0) {
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
  private boolean passedOver(Message m) {
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

  /** A data error: PostgreSQL refused the row (data, constraint, type); anything else is retried. */
  boolean isDataError(SQLException e) {
    if (host.isTransient(e)) {
      return false;
    }
    for (SQLException s = e; s != null; s = s.getNextException()) {
      String st = s.getSQLState();
      // only the server's verdict on this row: a driver-side error (no server message) is not the data's fault
      boolean server = !(s instanceof org.postgresql.util.PSQLException pe) || pe.getServerErrorMessage() != null;
      if (server && st != null && (st.startsWith("22") || st.startsWith("23") || st.equals("42804") || rowPolicy(s)
          || st.equals("P0001") || st.equals("2F000") || st.equals("42883")
          || st.equals("54000") // a value too large for its index row
          || st.equals("21000"))) { // a sql-mode statement whose subquery returned more than one row for this one
        return true;
      }
      if (s.getNextException() == s) {
        break;
      }
    }
    return false;
  }

  /**
   * A row refused by a row-level security policy's check (42501) or a view's WITH CHECK OPTION (44000): both come
   * from the executor's check of that row (routine {@code ExecWithCheckOptions}, not translated like the message),
   * unlike a privilege the role lacks on the whole table.
   */
  private static boolean rowPolicy(SQLException s) {
    return s instanceof org.postgresql.util.PSQLException pe && pe.getServerErrorMessage() != null
        && "ExecWithCheckOptions".equals(pe.getServerErrorMessage().getRoutine())
        && ("42501".equals(s.getSQLState()) || "44000".equals(s.getSQLState()));
  }

  /**
   * The database's error for Queen and the logs ({@code FAILED} and {@code DEAD_LETTER} acks, WARN lines): the
   * node's description of it ({@link ConnectorHost#describe}: class, SQLState, PostgreSQL's primary message, quoted
   * values masked in classes 22 and 23) and the names of the constraint, column, type and table PostgreSQL reports;
   * never a detail line, the statement or a value of the payload. A data error of the sink's own: its text.
   */
  private String errorText(Exception e) {
    if (e instanceof SQLException se) {
      SQLException inner = se.getNextException() != null ? se.getNextException() : se;
      StringBuilder d = new StringBuilder(host.describe(inner));
      if (inner instanceof org.postgresql.util.PSQLException pe && pe.getServerErrorMessage() != null) {
        var sm = pe.getServerErrorMessage(); // names of objects, never values
        for (String[] part : new String[][] {{"constraint", sm.getConstraint()}, {"column", sm.getColumn()},
            {"type", sm.getDatatype()}, {"table", sm.getTable()}}) {
          if (part[1] != null) {
            d.append("; ").append(part[0]).append(' ').append(part[1]);
          }
        }
      }
      return d.toString();
    }
    return e.getMessage();
  }

  /**
   * The database's error as PostgreSQL wrote it, for the dead letter's row in the target ({@code
   * queen.sink_dead_letters}, beside the data it is about): the primary message unmasked, then the constraint, column,
   * type and table (schema-qualified) PostgreSQL names, and the SQLState, from pgjdbc's {@code ServerErrorMessage}.
   * No detail, hint or context line (a row's values are there), never the statement. A data error of the sink's own:
   * its text.
   */
  private static String databaseError(Exception e) {
    if (!(e instanceof SQLException se)) {
      return e.getMessage();
    }
    SQLException inner = se.getNextException() != null ? se.getNextException() : se;
    if (!(inner instanceof org.postgresql.util.PSQLException pe) || pe.getServerErrorMessage() == null) {
      return "SQLState " + inner.getSQLState(); // not the server's verdict (not a data error): nothing of its text
    }
    var sm = pe.getServerErrorMessage();
    StringBuilder d = new StringBuilder(sm.getMessage() == null ? "" : sm.getMessage());
    String table = sm.getTable() == null ? null : sm.getSchema() == null ? sm.getTable() : sm.getSchema() + "."
        + sm.getTable();
    for (String[] part : new String[][] {{"constraint", sm.getConstraint()}, {"column", sm.getColumn()},
        {"type", sm.getDatatype()}, {"table", table}, {"SQLState", sm.getSQLState()}}) {
      if (part[1] != null) {
        d.append("; ").append(part[0]).append(' ').append(part[1]);
      }
    }
    return d.toString();
  }

  /**
   * Acknowledges what the committed batch did. The common case, every message completed, is returned for the
   * loop to acknowledge without waiting: the next batch's target transaction then runs while that ack commits
   * (a lost ack only redelivers messages the progress rows make no-ops). Otherwise one Queen transaction, in
   * offset order: the completed ones, each dead letter ({@code DEAD_LETTER}), and each refused head with
   * attempts left ({@code FAILED}: one attempt on the cursor, durable and seen by every node; the partition
   * waits the queue's {@code retryDelay} and its lease is released with it, so the messages held after the head
   * come again). Nothing here waits: the other partitions' next batches are not held up by the backoff.
   */
  private List<Message> settle(Outcome o) {
    if (o.dead.isEmpty() && o.failed.isEmpty()) {
      return o.done;
    }
    List<Message> all = new ArrayList<>(o.done);
    all.addAll(o.dead.keySet());
    all.addAll(o.failed.keySet());
    all.sort(java.util.Comparator.comparingLong(Message::partitionId).thenComparingLong(Message::offset));
    Transaction tx = host.queen().transaction();
    for (Message m : all) {
      String dead = o.dead.get(m);
      String failed = o.failed.get(m);
      if (dead != null) {
        tx.ack(m, AckStatus.DEAD_LETTER, dead);
      } else if (failed != null) {
        tx.ack(m, AckStatus.FAILED, failed);
      } else {
        tx.ack(m);
      }
    }
    // a lost lease rolls the whole bundle back: nothing counted (as for a crash); the next holder finds the
    // applied work in the progress table, the dead letters in queen.sink_dead_letters (tried once more: refused
    // again at the same attempt, they are dead-lettered again), and tries the refused head again at the same attempt
    if (tx.commit().success()) {
      dlq.addAndGet(o.dead.size());
      meters.dlq(o.dead.size());
    }
    return List.of();
  }
}
