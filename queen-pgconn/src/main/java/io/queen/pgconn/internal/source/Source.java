package io.queen.pgconn.internal.source;

import io.queen.ConnectorStatus;
import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvWriteResult;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.RuntimeOptions;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One source on this node. Every node runs every source; the node holding its KV lease owns it and streams,
 * the others show {@code standby} and try to take the lease over every third of its TTL. The owner checks the
 * setup, creates the publication and the slot, checks the slot against the pointer (R5) and runs a
 * {@link Stream}; it renews the lease at a third of the TTL and stops the stream at once when a renewal is lost.
 * {@link #stop()} gives the lease back at once, as soon as its walsender has let go of the slot (so the next owner does
 * not find the slot active), also while the node closes (through {@code ConnectorHost.kv()}). Threads: one owner
 * thread per source ({@code pg-<name>}), plus the stream's two while streaming. Status methods are thread-safe.
 *
 * <p>Beside it: {@link Takeover} (fencing the pointer, ending an earlier owner's walsender) and {@link SourceAdmin}
 * (what any node does to a source it need not run). This file stays near 700 lines on purpose: a spell of ownership
 * ({@code own}) and the status read and write the same phase, code, note and counters, and split across files that
 * state would be shared through setters that say less than the code does here.
 */
public final class Source implements Stream.Owner {
  private static final Logger LOG = LoggerFactory.getLogger(Source.class);

  private final ConnectorHost host;
  /** How often the node re-reads the connector documents: a failed stream tries again this often. */
  private final java.time.Duration refresh;
  private final SourceSpec spec;
  private final long version;
  private final String password;
  /** Whether this document is still the stored one (asked before creating a slot). */
  private final java.util.function.BooleanSupplier stored;
  /** Set once this instance created the slot: a delete this node learns of late drops it again. */
  private volatile boolean createdSlot;
  /** Set once this instance found its document deleted or replaced: it holds nothing from then on. */
  private volatile boolean withdrawn;
  private final SourceMeters.Connector meters;
  private final Lease lease;
  private final Takeover takeover;
  private final Codec codec;
  private volatile Thread owner;
  private volatile boolean stopped;
  private volatile String phase = "connecting";
  private volatile ErrorCode lastCode;
  private volatile String lastError;
  private volatile String note;
  private volatile Instant lastProgress;
  private volatile Stream stream;
  private volatile SnapshotHook hook;
  private final AtomicLong messages = new AtomicLong();
  private final AtomicLong transactions = new AtomicLong();
  private final AtomicLong bundles = new AtomicLong();
  private final AtomicLong snapshotRows = new AtomicLong();
  private final AtomicLong truncates = new AtomicLong();
  private final AtomicLong errors = new AtomicLong();
  private final AtomicLong slotLag = new AtomicLong();
  /** When {@link #slotLag} was last read ({@link System#nanoTime()}); 0 before the first read. */
  private volatile long slotLagAt;
  private volatile long pointerLsn;
  /** The idle standby slots last warned about (owner thread only). */
  private String idleSaid = "";
  private volatile long lastCommitMicros;

  public Source(ConnectorHost host, RuntimeOptions options, SourceSpec spec, long version, String password,
      SourceMeters meters) {
    this(host, options, spec, version, password, meters, () -> true);
  }

  /**
   * @param stored whether this document (this version) is still the stored one: asked before the source creates a
   *     slot, so a node whose registry has not seen a delete yet does not create a slot nobody would drop
   */
  public Source(ConnectorHost host, RuntimeOptions options, SourceSpec spec, long version, String password,
      SourceMeters meters, java.util.function.BooleanSupplier stored) {
    this.stored = stored;
    this.host = host;
    this.refresh = options.refresh();
    this.spec = spec;
    this.version = version;
    this.password = password;
    this.codec = new DecoderCodec();
    this.lease = new Lease(host.kv(), spec.name(), host.nodeId(), options.sourceLeaseTtl());
    this.takeover = new Takeover(host, spec, lease);
    this.meters = meters.connector(spec.name(), new SourceMeters.Gauges(this::slotLagGauge, () -> pointerLsn,
        this::lagSecondsGauge));
  }

  /** How old a reading of the slot's lag may be before its gauge says it does not know (three health checks). */
  static final long SLOT_LAG_STALE_NANOS = 30_000_000_000L;

  /**
   * The slot's lag as last read, or NaN when this node has not read it within {@link #SLOT_LAG_STALE_NANOS}: a standby
   * node, and an owner that cannot reach the source database (a login refused, the server down), do not know it, and a
   * last good reading shown meanwhile would hide a slot that pins more and more WAL.
   */
  private double slotLagGauge() {
    long at = slotLagAt;
    return at == 0 || System.nanoTime() - at > SLOT_LAG_STALE_NANOS ? Double.NaN : slotLag.get();
  }

  /** Now minus the commit time of the last transaction pushed while this node streams; NaN when it does not. */
  private double lagSecondsGauge() {
    if (stream == null) {
      return Double.NaN;
    }
    long at = lastCommitMicros;
    return at == 0 ? 0 : Math.max(0, System.currentTimeMillis() * 1000 - at) / 1e6;
  }

  public long version() {
    return version;
  }

  @Override
  public String node() {
    return host.nodeId();
  }

  /**
   * {@inheritDoc} The stream then stops and tries again rather than pass over a change a newer document may stream.
   */
  @Override
  public boolean storedStrictly() {
    return stored.getAsBoolean();
  }

  /** Whether this document is still the stored one; true when Queen's database cannot tell now. */
  boolean storedNow() {
    try {
      return stored.getAsBoolean();
    } catch (RuntimeException e) {
      return true;
    }
  }

  /**
   * After the registry found the document deleted and stopped this instance: drops the slot and publication if this
   * instance created them (it may have, on a node that had not seen the delete yet, after the deleting node dropped
   * what was there); nothing otherwise. Best effort, logged.
   */
  public void dropWhatItCreated() {
    if (createdSlot) {
      SourceAdmin.dropObjects(host, spec, password);
    }
  }

  public SourceSpec spec() {
    return spec;
  }

  /** Starts the owner thread (once). */
  public synchronized void start() {
    if (stopped || owner != null) {
      return;
    }
    if (!spec.enabled()) {
      phase = "disabled";
      return;
    }
    owner = host.newThread("pg-" + spec.name(), this::run);
    owner.start();
    Thread renewer = host.newThread("pg-" + spec.name() + "-lease", this::renewLoop);
    renewer.start();
  }

  /** Stops streaming and gives the lease back at once. */
  public void stop() {
    stopped = true;
    Thread t = owner;
    if (t != null) {
      t.interrupt();
      try {
        t.join(host.closeGrace().toMillis() + 10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Whether this node owns and streams the source now (the owner gauge). */
  public boolean owning() {
    return !stopped && lease.held() && ("streaming".equals(phase) || "snapshot".equals(phase));
  }

  /** Counts rows the snapshot pushed ({@code queen_pg_source_snapshot_rows_total}). */
  @Override
  public void snapshotRows(long n) {
    if (n > 0) {
      snapshotRows.addAndGet(n);
      meters.snapshotRows(n);
    }
  }

  @Override
  public void truncateSkipped() {
    truncates.incrementAndGet();
  }

  @Override
  public void committed(int events, int txs, Pointer p, long commitMicros) {
    messages.addAndGet(events);
    transactions.addAndGet(txs);
    meters.messages(events);
    meters.transactions(txs);
    if (events > 0 || txs > 0) { // an idle advance (the pointer alone) is not a bundle
      bundles.incrementAndGet();
      meters.bundle();
    }
    pointerLsn = p.lsn();
    if (commitMicros != 0) {
      lastCommitMicros = commitMicros;
    }
    lastProgress = Instant.now();
    SnapshotHook h = hook;
    // the committed pointer's own progress decides: the snapshot may have read its last chunk for a bundle still
    // being built while an earlier one commits (the phase then said streaming, and the done line undercounted)
    boolean copying = h != null && (!h.done() || p.snapshot() != null && !p.snapshot().path("done").asBoolean(true));
    String next = copying ? "snapshot" : "streaming";
    if (lastCode == ErrorCode.STREAM_FAILED && (events > 0 || txs > 0)) {
      LOG.info("{} - source '{}': a bundle committed again after the stream failed; {}", host.nodeId(), spec.name(),
          next);
      lastCode = null;
      lastError = null;
    } else if (lastCode == ErrorCode.STREAM_FAILED) {
      return; // the pointer alone moved (an idle advance): nothing got past the failure yet
    }
    if ("snapshot".equals(phase) && "streaming".equals(next)) {
      LOG.info("{} - source '{}': snapshot done ({} row(s) pushed by this node), streaming", host.nodeId(),
          spec.name(), snapshotRows.get());
    }
    phase = next;
  }

  public ConnectorStatus status() {
    // the phase before the counters: committed() moves the counters first, so a phase read here never runs ahead of
    // them (a status read as the snapshot finished said streaming with the last table's rows not yet counted)
    String ph = phase;
    Map<String, Long> counters = new LinkedHashMap<>();
    counters.put("messages", messages.get());
    counters.put("transactions", transactions.get());
    counters.put("bundles", bundles.get());
    counters.put("snapshotRows", snapshotRows.get());
    counters.put("truncatesSkipped", truncates.get());
    counters.put("errors", errors.get());
    double slotLagBytes = slotLagGauge();
    if (!Double.isNaN(slotLagBytes)) {
      counters.put("slotLagBytes", (long) slotLagBytes); // the gauge's reading, on the owner only (dashboards show it)
    }
    SourceAdmin.Stored stored = SourceAdmin.stored(host, spec.name()); // what this node knows when unavailable
    if (!spec.enabled()) {
      ph = "disabled";
    } else if (!lease.held() && !"error".equals(ph)) {
      ph = "standby";
    }
    ErrorCode code = lastCode;
    String error = code != null ? lastError : note;
    return new ConnectorStatus(spec.name(), "source", ph, code == null ? null : code.code(), error, counters,
        lastProgress, stored.lsn(), stored.leaseNode(), stored.expires(), stored.pointer());
  }

  // ------------------------------------------------------------------------------ the owner thread

  private void run() {
    long retry = refresh.toMillis();
    try {
      while (!stopped) {
        if (withdrawn || !storedNow()) {
          // deleted or replaced, and this node's registry has not stopped this instance yet: it must not hold the
          // lease or the slot (the deleting node drops the slot once nobody streams from it), nor make a new one
          withdrawn = true;
          phase = "standby";
          Stream s = stream;
          if (s != null) {
            s.stop();
          }
          if (lease.held()) {
            try {
              lease.release();
            } catch (RuntimeException e) {
              // Queen's database out of reach: the lease runs out by itself
            }
          }
          Thread.sleep(Math.max(100, lease.ttl().toMillis() / 3));
          continue;
        }
        if (!lease.held()) {
          boolean got;
          try {
            got = lease.acquire();
          } catch (RuntimeException e) {
            got = false;
          }
          if (!got) {
            phase = "standby";
            Thread.sleep(Math.max(100, lease.ttl().toMillis() / 3));
            continue;
          }
          takeover.slotFree(); // a new spell of ownership: any wait for the slot starts from here
          LOG.info("{} - source '{}': this node owns it now", host.nodeId(), spec.name());
        }
        if (lastCode == null) {
          phase = "connecting"; // while an error is being retried the status keeps saying error, with its code
        }
        try {
          own();
          if (!stopped && lease.held()) {
            Thread.sleep(retry); // an error or a broken stream: try again after a pause, still the owner
          }
        } catch (SQLException | RuntimeException e) {
          if (stopped) {
            break; // closing: the connections it used are being closed under it, which is no error of the source
          }
          failed(e);
          Thread.sleep(retry);
        }
      }
    } catch (InterruptedException e) {
      // stopping
    } finally {
      Stream s = stream;
      if (s != null) {
        s.stop();
      }
      try {
        lease.release(); // after the stream's stop: its walsender has let go of the slot
      } catch (RuntimeException e) {
        LOG.warn("{} - source '{}': the lease could not be given back ({}); another node takes over once it runs out",
            host.nodeId(), spec.name(), host.describe(e));
      }
    }
  }

  /**
   * Renews the held lease every third of its TTL, whatever the owner thread is doing (streaming, waiting for a
   * slot, in error); a lost renewal stops the stream at once.
   */
  private void renewLoop() {
    long every = Math.max(100, lease.ttl().toMillis() / 3);
    while (!stopped) {
      try {
        Thread.sleep(every);
      } catch (InterruptedException e) {
        return;
      }
      if (stopped || !lease.held()) {
        continue;
      }
      if (!storedNow()) {
        withdrawn = true; // the owner thread lets go of the slot and the lease
        Stream s = stream;
        if (s != null) {
          s.abort();
        }
        continue;
      }
      boolean kept;
      try {
        kept = lease.renew();
      } catch (RuntimeException e) {
        kept = true; // Queen's database unreachable: tried again; the pointer's expect still fences
      }
      if (!kept) {
        Stream s = stream;
        if (s != null) {
          s.abort();
        }
      }
    }
  }

  private void failed(Exception e) {
    // a failure that passes is a connection (or Queen's database) out of reach; any other is a refused statement
    // without a connection block the source logs in as Queen's pool does: whether that has a password is not known here
    ErrorCode login = e instanceof SQLException se
        ? ErrorCode.ofLogin(se, password != null || spec.connection() == null) : null;
    ErrorCode code = login != null ? login : host.isTransient(e) ? ErrorCode.CONNECT_FAILED : ErrorCode.SETUP_FAILED;
    error(code, host.describe(e));
  }

  /** The source stops with {@code code}: counted as an error (a refused setup as much as a failed stream). */
  private void error(ErrorCode code, String why) {
    errors.incrementAndGet();
    meters.error();
    boolean changed = lastCode != code;
    phase = "error";
    lastCode = code;
    lastError = code.fix() + " (" + why + ")";
    if (changed) {
      LOG.warn("{} - source '{}' stopped ({}): {}", host.nodeId(), spec.name(), code.code(), why);
    }
  }

  /** One spell of ownership: setup, slot check, stream, lease renewals; returns when it ends. */
  private void own() throws SQLException, InterruptedException {
    SourceConnections conns;
    try {
      conns = SourceConnections.of(spec, password, host.dataSource());
    } catch (SourceConnections.Unavailable u) {
      error(u.code, u.getMessage());
      return;
    }
    try (Connection normal = conns.normal(codec)) {
      try {
        SourceSetup.check(normal, spec);
      } catch (SourceSetup.Failed f) {
        error(f.code, f.getMessage());
        return;
      }
      KvEntry pe = takeover.fencePointer();
      if (pe == null) {
        return;
      }
      Pointer pointer = pe.found() ? Pointer.of(pe.value(), codec) : null;
      long pv = pe.found() ? pe.version() : 0;
      try {
        SourceSetup.publication(normal, spec);
      } catch (SourceSetup.Failed f) {
        error(f.code, f.getMessage());
        return;
      }
      SourceSetup.Slot slot = SourceSetup.slot(normal, spec.slot());
      if (pointer == null || pointer.resync()) {
        if (slot.exists() && !SourceSetup.dropSlot(normal, spec.slot())) {
          phase = "waiting_for_slot";
          note = "another process holds the slot " + spec.slot();
          return;
        }
        if (!storedNow()) {
          withdrawn = true; // deleted or replaced meanwhile: the registry stops this instance at its next re-read
          return;
        }
        note = "creating the replication slot: it waits for the transactions running now to end (pg_stat_activity)";
        String cp;
        try (Connection repl = conns.replication(codec)) {
          cp = SourceSetup.createSlot(repl, spec.slot(), SourceSetup.hasStandbys(normal));
          createdSlot = true;
        } catch (SQLException e) {
          if (host.isTransient(e)) {
            throw e;
          }
          error(ErrorCode.SLOT_CREATION, host.describe(e));
          return;
        } finally {
          note = null;
        }
        long lsn = codec.parseLsn(cp);
        Pointer fresh = new Pointer(lsn, 0, false, lsn, codec.newEpoch(), null, false);
        KvWriteResult w = host.queen().kv().put(Lease.NAMESPACE, Lease.pointerKey(spec.name()),
            fresh.json(host.mapper(), codec), Kv.forever().expect(pv));
        if (!w.applied()) {
          lease.abandon(); // someone else moved the pointer: not ours any more
          return;
        }
        pointer = fresh;
        pv = w.version();
        LOG.info("{} - source '{}': slot {} created at {}, epoch {}", host.nodeId(), spec.name(), spec.slot(), cp,
            fresh.epoch());
      } else {
        if (!slot.exists() || slot.otherDatabase()) {
          error(ErrorCode.SLOT_LOST, "slot " + spec.slot());
          return;
        }
        if (slot.invalidated()) {
          error(ErrorCode.SLOT_INVALIDATED, "slot " + spec.slot() + ": " + (slot.invalidationReason() != null
              ? slot.invalidationReason() : "wal_status " + slot.walStatus()));
          return;
        }
        if (slot.confirmedFlushLsn() != null
            && Long.compareUnsigned(codec.parseLsn(slot.confirmedFlushLsn()), pointer.flush()) > 0) {
          error(ErrorCode.SLOT_AHEAD, "slot " + spec.slot() + " confirmed " + slot.confirmedFlushLsn() + ", pointer "
              + codec.formatLsn(pointer.flush()));
          return;
        }
      }
      if (createdSlot || !slot.exists()) {
        slot = SourceSetup.slot(normal, spec.slot()); // created just now: as it is
      }
      if (slot.exists() && !slot.failover() && slot.activePid() == null && SourceSetup.hasStandbys(normal)) {
        // created before the server had a standby: a failover would lose it (slot_lost, a resync)
        try (Connection repl = conns.replication(codec)) {
          SourceSetup.makeFailover(repl, spec.slot());
          LOG.info("{} - source '{}': slot {} is a failover slot now (the server streams to a standby)", host.nodeId(),
              spec.name(), spec.slot());
        } catch (SQLException e) {
          LOG.warn("{} - source '{}': could not make slot {} a failover slot ({}); a failover would lose it",
              host.nodeId(), spec.name(), spec.slot(), host.describe(e));
        }
      }
      List<String> idle = slot.exists() && slot.failover() ? SourceSetup.idleStandbySlots(normal) : List.of();
      String idleNow = String.join(", ", idle);
      boolean sayIdle = !idle.isEmpty() && !idleNow.equals(idleSaid); // once per change, not at every retry
      idleSaid = idleNow;
      if (sayIdle) {
        LOG.warn("{} - source '{}': synchronized_standby_slots names {}, which no standby streams from now: PostgreSQL"
            + " holds back the changes of every failover slot, this source's included, until each named standby"
            + " confirms them (after a promotion the server keeps its old primary's setting, naming itself: clear it)",
            host.nodeId(), spec.name(), String.join(", ", idle));
      }
      pointerLsn = pointer.lsn();
      // the snapshot's rows are counted by the stream once Queen committed them (a chunk handed over and lost
      // with its owner is copied again by the next one, and counted there)
      SnapshotHook h = !spec.snapshotFirst() ? null : snapshot(spec, pointer.epoch(),
          () -> conns.normal(codec), rows -> { }, r -> host.newThread("pg-" + spec.name() + "-snapshot", r));
      if (h != null) {
        try {
          h.restore(pointer.snapshot());
        } catch (ChunkedSnapshot.TablesChanged e) {
          error(ErrorCode.TABLES_CHANGED, e.getMessage());
          return;
        }
      }
      hook = h;
      // decided at each start (a gate then reads the setting with every bundle; one that was empty at the start
      // counts from the next start)
      StandbyGate gate = StandbyGate.of(host.dataSource(), spec.slot(),
          host.nodeId() + " - source '" + spec.name() + "'");
      Connection repl = conns.replication(codec);
      Stream s = new Stream(this, spec, codec, host.queen(), host.mapper(), normal, repl, h, pointer, pv, gate);
      try {
        s.start((role, r) -> host.newThread("pg-" + spec.name() + "-" + role, r));
      } catch (SQLException e) {
        repl.close();
        String state = e.getSQLState();
        if ("55006".equals(state)) {
          phase = "waiting_for_slot";
          note = "another process holds the slot " + spec.slot();
          lastCode = null;
          takeover.endStaleWalsender(normal);
          return;
        }
        takeover.slotFree();
        if ("42704".equals(state)) {
          error(ErrorCode.SLOT_LOST, "slot " + spec.slot());
          return;
        }
        if ("55000".equals(state) || "58P01".equals(state)) {
          error(ErrorCode.SLOT_INVALIDATED, "slot " + spec.slot());
          return;
        }
        throw e;
      }
      stream = s;
      takeover.slotFree();
      if (h != null) {
        h.start();
      }
      note = null;
      if (lastCode == ErrorCode.STREAM_FAILED) {
        phase = "error"; // trying the change that failed again; committed() clears it once a bundle gets past
      } else {
        lastCode = null;
        lastError = null;
        phase = h != null && !h.done() ? "snapshot" : "streaming";
      }
      LOG.info("{} - source '{}' {} from {} (slot {}, publication {})", host.nodeId(), spec.name(), phase,
          codec.formatLsn(pointer.lsn()), spec.slot(), spec.publication());
      try {
        watch(s, normal);
      } finally {
        if (h != null) {
          h.close();
        }
        s.stop();
        stream = null;
        slotLagAt = 0; // no longer watched from here: the gauge says it does not know rather than show the last reading
      }
    }
  }

  /** While the stream runs: renew the lease at a third of its TTL, check the slot's health about every 10 s. */
  private void watch(Stream s, Connection normal) throws InterruptedException {
    long nextHealth = 0;
    while (!stopped && s.alive() && lease.held()) {
      Thread.sleep(200);
      long now = System.currentTimeMillis();
      if (now >= nextHealth) {
        nextHealth = now + 10_000;
        health(normal);
        if (resyncAsked()) {
          LOG.info("{} - source '{}': a resync was asked for; starting over", host.nodeId(), spec.name());
          return;
        }
      }
    }
    if (!lease.held() && !stopped) {
      LOG.warn("{} - source '{}': the lease was lost; streaming stopped", host.nodeId(), spec.name());
    }
    Stream.Failure f = s.failure();
    if (f != null && f.kind() == Stream.Kind.DOCUMENT_CHANGED) {
      LOG.info("{} - source '{}': a table this document does not stream has changes and a newer document is stored;"
          + " the stream stops before them for the new document", host.nodeId(), spec.name());
      return;
    }
    if (f != null && f.kind() == Stream.Kind.POINTER_LOST && !resyncAsked()) {
      LOG.warn("{} - source '{}': the pointer moved under this node (another owner or a resync); streaming stops",
          host.nodeId(), spec.name());
      lease.abandon();
    } else if (f != null && f.cause() != null && !stopped) {
      if (host.isTransient(f.cause())) {
        errors.incrementAndGet();
        meters.error();
        LOG.warn("{} - source '{}': the stream broke ({}); starting again", host.nodeId(), spec.name(),
            host.describe(f.cause()));
      } else {
        // the same change will fail again: the status says so (logged once) until a bundle past it commits
        error(ErrorCode.STREAM_FAILED, reason(f.cause()));
      }
    }
  }


  /**
   * Why a change failed, for the status and the log. The source's own checks throw {@link IllegalStateException} or
   * {@link IllegalArgumentException} with sentences that name tables, columns and sizes, never a value: those are
   * shown (when this package threw them, and of exactly those classes, so no JDK subclass such as a number parse with
   * its input); anything else through the host's description, which keeps only what cannot hold a value.
   */
  private String reason(Throwable t) {
    StackTraceElement[] at = t.getStackTrace();
    boolean ours = at.length > 0 && at[0].getClassName().startsWith("io.queen.pgconn.");
    if (ours && (t.getClass() == IllegalStateException.class || t.getClass() == IllegalArgumentException.class)) {
      return t.getClass().getName() + ": " + t.getMessage();
    }
    return host.describe(t);
  }

  private boolean resyncAsked() {
    try {
      KvEntry p = host.queen().kv().get(Lease.NAMESPACE, Lease.pointerKey(spec.name()));
      return p.found() && p.value().path("resync").asBoolean(false);
    } catch (RuntimeException e) {
      return false;
    }
  }

  private void health(Connection normal) {
    try (var st = normal.prepareStatement("select pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint"
        + " from pg_replication_slots where slot_name = ?")) {
      st.setString(1, spec.slot());
      try (var rs = st.executeQuery()) {
        if (rs.next()) {
          slotLag.set(rs.getLong(1));
          slotLagAt = System.nanoTime();
        }
      }
    } catch (SQLException e) {
      // the stream reports a broken connection itself
    }
  }

  /**
   * The snapshot of a source: its tables in document order, {@code snapshotChunkRows}, events with the source's
   * epoch, rows counted into {@code queen_pg_source_snapshot_rows_total}.
   */
  private static ChunkedSnapshot snapshot(SourceSpec spec, String epoch, ChunkedSnapshot.Connector normal,
      java.util.function.LongConsumer rows, java.util.function.Function<Runnable, Thread> threads) {
    List<SnapshotTable> tables = new ArrayList<>();
    for (SourceSpec.Table t : spec.tables()) {
      tables.add(new SnapshotTable(t.schema(), t.table(), t.queue(), t.partitionBy(), t.single()));
    }
    return new ChunkedSnapshot(tables, spec.snapshotChunkRows(), normal, Values::apply, new SnapshotEvents(epoch),
        rows, threads);
  }
}
