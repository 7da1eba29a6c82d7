package io.queen.pgconn.internal.sink;

import io.queen.AckStatus;
import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.Transaction;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConsumeSpec;
import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.SinkSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One sink on this node: its lifecycle (start check, consume loop, stop), its status and counters, and the loop's
 * handling of one batch. Each batch is one transaction on the target that locks the batch's progress rows in
 * {@code queen.sink_progress} (in partition-id order), drops every message at or below its partition's last offset,
 * applies the rest, advances the offsets and commits; only then are the messages acknowledged in Queen. A typed
 * payload is read as the node's consumers read it: an older version brought up to the newest the node knows by its
 * upcasters, a newer one a data error. A message PostgreSQL refuses is tried exactly {@code maxAttempts} times (its
 * tries counted on its partition's progress row, a statement shared with other messages included; see {@link
 * BatchApply}) and then dead-lettered with the database's error, and its partition goes on; a transient failure is
 * retried with back-off and never counts. A dead letter is recorded in {@code queen.sink_dead_letters} (with the database's message as
 * PostgreSQL wrote it) in the transaction that moves the progress row past it, so a message at or below its row is
 * told apart as applied (dropped) or dead-lettered (tried again: a redrive, or a batch whose dead-letter
 * acknowledgement never reached Queen); Queen's record of it carries the same error with values masked, as the logs
 * do.
 *
 * <p>The parts, each used only from here down: {@link BatchApply} (one batch in its transaction), {@link
 * RowStatements} (a message as a statement), {@link SinkTables} (the progress and dead-letter tables), {@link
 * TargetErrors} (reading the target's errors), {@link TargetConnections} (the connections to the target).
 */
public final class Sink {
  private static final Logger LOG = LoggerFactory.getLogger(Sink.class);
  /** How many times one batch is retried after transient failures before its leases are given back. */
  static final int TRANSIENT_RETRIES = 8;
  final SinkSpec spec;
  private final long version;
  private final ConnectorHost host;
  /** How often the node re-reads the connector documents: how old the reading of the table's shape may get. */
  private final Duration refresh;
  private final String password;
  private final TargetConnections connections;
  private final RowStatements rows;
  private final BatchApply batchApply;
  /** When the table's shape in use ({@link RowStatements#table}) was read ({@code System.nanoTime()}). */
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
  final AtomicLong dlq = new AtomicLong();
  final AtomicLong batches = new AtomicLong();
  final AtomicLong errors = new AtomicLong();
  private volatile boolean stopped;
  private final SinkMeters.Connector meters;

  /**
   * @param refresh how often the node re-reads the connector documents ({@code ConnectorOptions.refresh}): how old
   *     this sink's reading of its table's shape may get
   */
  public Sink(ConnectorHost host, Duration refresh, SinkSpec spec, long version, String password,
      SinkMeters.Connector meters) {
    this.meters = meters;
    this.host = host;
    this.refresh = refresh;
    this.spec = spec;
    this.version = version;
    this.password = password;
    this.connections = new TargetConnections(host, spec, password);
    this.rows = new RowStatements(host, spec, applied::get);
    this.batchApply = new BatchApply(host, spec, connections, new SinkTables(spec.name(), connections), rows);
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
    try (Connection c = connections.open()) {
      c.setAutoCommit(false);
      SinkTables.ensure(c);
      rows.use(spec.table() != null ? TargetTable.check(c, spec) : null);
      shapeReadAt = System.nanoTime();
      shapeStale = false;
      if ("sql".equals(spec.mode())) {
        // the statement may write any table: checked at once if the database has any deferrable constraint
        try (Statement st = c.createStatement();
            ResultSet rs = st.executeQuery("select exists (select 1 from pg_constraint where condeferrable)")) {
          rs.next();
          batchApply.anyDeferrable(rs.getBoolean(1));
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
    connections.dropDeadWorkers();
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
    connections.closeAll();
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
        c = connections.forWorker();
        readShapeIfDue(c);
        BatchApply.Outcome o = batchApply.apply(c, batch);
        c.commit();
        count(o);
        connections.release(c, false);
        return settle(o);
      } catch (TargetTable.CheckFailed e) {
        if (c != null) {
          try {
            c.rollback();
          } catch (SQLException | RuntimeException ignore) {
            // the connection may be gone
          }
          connections.release(c, true);
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
          connections.release(c, true);
        }
        errors.incrementAndGet();
        meters.error();
        if (stopped || suspended.get() || Thread.currentThread().isInterrupted()) {
          throw new GiveBack("stopping"); // (after a failed check the phase keeps the check's code)
        }
        lastCode = ErrorCode.TRANSIENT; // whatever it was, it is retried and never dead-letters
        lastError = host.describe(e);
        if (e instanceof SQLException se && rows.table() != null && TargetErrors.shapeError(se)) {
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
   * Reads the table's shape again when the last read is older than {@code refresh} (the cadence at which
   * nodes re-read the documents) or a statement said the table changed: a column added is written from then on,
   * one dropped is no longer named. A table that no longer passes the start check stops the loop (below).
   */
  private void readShapeIfDue(Connection c) throws SQLException {
    TargetTable was = rows.table();
    boolean forced = shapeStale;
    if (was == null || (!forced && System.nanoTime() - shapeReadAt < refresh.toNanos())) {
      return;
    }
    if (forced) {
      try {
        SinkTables.ensure(c); // a failure may also have been one of the sink's own tables gone
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
      rows.use(now);
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

  /** Counts what a committed batch did. */
  private void count(BatchApply.Outcome o) {
    int appliedHere = o.done().size() - o.skipped() - o.ignored();
    applied.addAndGet(appliedHere);
    skipped.addAndGet(o.skipped());
    ignored.addAndGet(o.ignored());
    meters.ignored(o.ignored());
    batches.incrementAndGet();
    meters.applied(appliedHere);
    meters.skipped(o.skipped());
    meters.batch();
    lastProgress = Instant.now();
    if ("running".equals(phase) || lastCode == ErrorCode.TRANSIENT) {
      lastCode = null;
      lastError = null;
    }
  }

  /**
   * Acknowledges what the committed batch did. The common case, every message completed, is returned for the
   * loop to acknowledge without waiting: the next batch's target transaction then runs while that ack commits
   * (a lost ack only redelivers messages the progress rows make no-ops). Otherwise one Queen transaction, in
   * offset order: the completed ones, each dead letter ({@code DEAD_LETTER}), and each refused head with
   * tries left ({@code FAILED}: one attempt on the cursor, seen by every node, its tries already counted on the
   * progress row; the partition
   * waits the queue's {@code retryDelay} and its lease is released with it, so the messages held after the head
   * come again). Nothing here waits: the other partitions' next batches are not held up by the backoff.
   */
  private List<Message> settle(BatchApply.Outcome o) {
    if (o.dead().isEmpty() && o.failed().isEmpty()) {
      return o.done();
    }
    List<Message> all = new ArrayList<>(o.done());
    all.addAll(o.dead().keySet());
    all.addAll(o.failed().keySet());
    all.sort(java.util.Comparator.comparingLong(Message::partitionId).thenComparingLong(Message::offset));
    Transaction tx = host.queen().transaction();
    for (Message m : all) {
      String dead = o.dead().get(m);
      String failed = o.failed().get(m);
      if (dead != null) {
        tx.ack(m, AckStatus.DEAD_LETTER, dead);
      } else if (failed != null) {
        tx.ack(m, AckStatus.FAILED, failed);
      } else {
        tx.ack(m);
      }
    }
    // a lost lease rolls the whole bundle back: nothing counted in Queen (as for a crash); the next holder finds the
    // applied work in the progress table, the dead letters in queen.sink_dead_letters (dead-lettered again, or tried
    // once more as a redrive is), and the refused head's tries on its progress row, and counts on from them
    if (tx.commit().success()) {
      dlq.addAndGet(o.dead().size());
      meters.dlq(o.dead().size());
    }
    return List.of();
  }
}
