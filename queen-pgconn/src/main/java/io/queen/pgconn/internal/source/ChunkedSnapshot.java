package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import java.util.function.LongConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The source's initial snapshot: each table read in key order, {@code chunkRows} rows at a time, while the stream
 * keeps running, with DBLog watermarks. A {@link SnapshotHook} the stream drives. This class holds the window, the
 * progress and the chunk thread; {@link ChunkReader} reads (one chunk, with its low and high watermarks around it),
 * {@link SnapshotHistory} decides at the high watermark which rows survive and which fills follow, and
 * {@link ChunkEvents} builds the events.
 *
 * <p><b>One window.</b> The next chunk starts only after the previous one's high watermark came back through the
 * stream: one window is open at a time, and no transaction stays open longer than one chunk's read, so VACUUM is
 * never held back. The stream pushes a chunk's events in the Queen transaction that moves the pointer past its high
 * watermark, together with {@link #progress()}, which then already names the chunk's last key: a crash repeats at
 * most that chunk.
 *
 * <p><b>Progress</b> ({@code {"table":i,"name":"s.t","last":[..],"max":[..],"done":b}}): the table's index in
 * document order, the last key read, the table's maximum key taken when its copy began (the snapshot stops
 * there; later rows come through the stream) and whether every table is copied. {@link #restore(JsonNode)} with
 * null starts clean (a first start, or a resync's new epoch). Markers of an older window (written before a
 * restart, or by another source of the same database) carry another window id and are ignored.
 *
 * <p><b>Schema change.</b> A change of the window's table inside the window whose relation's columns differ from
 * those of the table's previous change or of the chunk discards the buffer; the same chunk is read again.
 *
 * <p><b>Threads.</b> {@link #onChange}, {@link #onMarker}, {@link #progress()},
 * {@link #restore} and {@link #done()} may be called from any thread (the stream calls them from the one that
 * builds Queen transactions); {@link #restore} before {@link #start()}. {@link #start()} starts the chunk thread,
 * {@link #close()} stops it (idempotent, bounded).
 *
 * <p>Needs on the source: SELECT on the tables, and REPLICATION (or superuser) for
 * {@code pg_logical_emit_message}, which the source's role has anyway.
 *
 * <p>This file is somewhat over 600 lines on purpose: the window, the progress and the chunk thread's steps share one
 * lock and its condition, and keeping every access to that state next to the lock is what lets a reader check it.
 */
public final class ChunkedSnapshot implements SnapshotHook, AutoCloseable {
  /** The default of the document's {@code snapshotChunkRows}. */
  public static final int DEFAULT_CHUNK_ROWS = 2_000;

  private static final Logger LOG = LoggerFactory.getLogger(ChunkedSnapshot.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long MAX_BACKOFF_MS = 5_000;
  private static final long CLOSE_WAIT_MS = 10_000;

  /** Opens a normal (non-replication) connection to the source database. */
  @FunctionalInterface
  public interface Connector {
    Connection open() throws SQLException;
  }

  /** Puts a connection under the walsender's output settings (time zone, DateStyle, IntervalStyle, bytea_output). */
  @FunctionalInterface
  public interface SessionSettings {
    void apply(Connection connection) throws SQLException;
  }

  /** The open window; fields guarded by {@link #lock}. */
  private static final class Window {
    final String id;
    final int table;
    boolean lwSeen;
    long startSeq;
    ChunkReader.Chunk chunk;
    boolean repeat;

    Window(String id, int table) {
      this.id = id;
      this.table = table;
    }
  }

  private final List<SnapshotTable> tables;
  private final Map<String, Integer> tableIndex = new HashMap<>();
  private final int chunkRows;
  private final Connector connector;
  private final SessionSettings settings;
  private final ChunkEvents events;
  private final LongConsumer rowsCounter;
  private final Function<Runnable, Thread> threads;
  private final String nonce;

  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  // guarded by lock
  private int table;
  private List<String> last;
  private List<String> max;
  private boolean maxKnown;
  private boolean done;
  private volatile boolean finished; // = done, read without the lock
  private Window window;
  private long windowCount;
  private final SnapshotHistory history = new SnapshotHistory();
  private final Map<Integer, List<String>> streamShapes = new HashMap<>();
  private final Map<Integer, List<String>> keyNamesByTable = new HashMap<>();

  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();
  private volatile Thread thread;
  private Connection conn; // chunk thread only
  private boolean keysLoaded; // chunk thread only

  /**
   * @param tables the source's tables in document order
   * @param chunkRows rows per chunk ({@code snapshotChunkRows}), at least 1
   * @param connector opens a normal connection to the source database
   * @param settings the walsender's output settings for that connection ({@code Values.apply})
   * @param events builds the events (the same rules as the stream's)
   * @param rowsCounter told how many {@code r} rows each chunk emitted ({@code queen_pg_source_snapshot_rows_total})
   * @param threads makes the chunk thread (named after the source, e.g. {@code pg-<connector>-snapshot})
   */
  public ChunkedSnapshot(List<SnapshotTable> tables, int chunkRows, Connector connector, SessionSettings settings,
      ChunkEvents events, LongConsumer rowsCounter, Function<Runnable, Thread> threads) {
    this.tables = List.copyOf(Objects.requireNonNull(tables, "tables must not be null"));
    if (chunkRows < 1) {
      throw new IllegalArgumentException("snapshotChunkRows must be at least 1, was " + chunkRows);
    }
    this.chunkRows = chunkRows;
    this.connector = Objects.requireNonNull(connector, "connector must not be null");
    this.settings = Objects.requireNonNull(settings, "settings must not be null");
    this.events = Objects.requireNonNull(events, "events must not be null");
    this.rowsCounter = Objects.requireNonNull(rowsCounter, "rowsCounter must not be null");
    this.threads = Objects.requireNonNull(threads, "threads must not be null");
    for (int i = 0; i < this.tables.size(); i++) {
      if (tableIndex.putIfAbsent(this.tables.get(i).qualifiedName(), i) != null) {
        throw new IllegalArgumentException("table listed twice: " + this.tables.get(i).qualifiedName());
      }
    }
    byte[] b = new byte[6];
    new SecureRandom().nextBytes(b);
    this.nonce = HexFormat.of().formatHex(b);
    restore(null);
  }

  // ---------------------------------------------------------------- the hook (stream side)

  @Override
  public void restore(JsonNode progress) {
    lock.lock();
    try {
      window = null;
      history.clear();
      streamShapes.clear();
      last = null;
      max = null;
      maxKnown = false;
      table = 0;
      done = false;
      if (progress != null && !progress.isNull() && progress.path("done").asBoolean(false)) {
        // copied: tables added to the document since are streamed from now on, not copied (a resync copies them)
        table = tables.size();
      } else if (progress != null && !progress.isNull()) {
        int i = progress.path("table").asInt(-1);
        String name = progress.path("name").asText(null);
        if (i < 0 || i > tables.size() || i < tables.size() && !tables.get(i).qualifiedName().equals(name)) {
          throw new TablesChanged("the source's snapshot was copying table #" + (i + 1) + " (" + name
              + ") and the document now lists " + tables.size() + " table(s) with another one in that place");
        }
        table = i;
        last = keyOf(progress.get("last"));
        max = keyOf(progress.get("max"));
        maxKnown = progress.hasNonNull("max");
        done = progress.path("done").asBoolean(false) || i == tables.size();
      }
      if (table >= tables.size()) {
        done = true;
      }
      finished = done;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /**
   * The document's table list changed in front of the table the snapshot was copying (removed, or another moved
   * before it), so which tables are copied is no longer known.
   */
  public static final class TablesChanged extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    TablesChanged(String message) {
      super(message);
    }
  }

  @Override
  public JsonNode progress() {
    lock.lock();
    try {
      ObjectNode p = JSON.createObjectNode();
      p.put("table", table);
      p.put("name", table < tables.size() ? tables.get(table).qualifiedName() : null);
      p.set("last", keyJson(last));
      p.set("max", maxKnown ? keyJson(max) : null);
      p.put("done", done);
      return p;
    } finally {
      lock.unlock();
    }
  }

  @Override
  public boolean done() {
    lock.lock();
    try {
      return done;
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void onChange(PgMessage.Relation relation, PgMessage.Tuple keyTuple, long xid, SourceEvent event) {
    if (finished) {
      return; // the stream calls this for every change, long after the copy
    }
    Integer i = tableIndex.get(relation.schema() + "." + relation.name());
    if (i == null) {
      return;
    }
    String op = String.valueOf(event.op());
    Set<String> unchanged = new HashSet<>(event.unchanged());
    List<String> names = names(relation);
    for (int c = 0; c < keyTuple.size() && c < names.size(); c++) {
      if (keyTuple.kinds()[c] == 'u') {
        unchanged.add(names.get(c));
      }
    }
    lock.lock();
    try {
      if (done || i < table) {
        return;
      }
      List<String> key = keyFromStream(i, relation, keyTuple);
      if (key == null) {
        return;
      }
      history.add(xid, i, key, unchanged, op.equals("d"));
      List<String> before = streamShapes.put(i, names);
      if (window != null && window.lwSeen && window.table == i) {
        if (before != null && !before.equals(names)) {
          window.repeat = true;
        }
        if (window.chunk != null && !window.chunk.shape().columnNames().equals(names)) {
          window.repeat = true;
        }
      }
    } finally {
      lock.unlock();
    }
  }

  @Override
  public List<SourceEvent> onMarker(PgMessage.LogicalMessage m) {
    JsonNode marker;
    try {
      marker = JSON.readTree(new String(m.content(), StandardCharsets.UTF_8));
    } catch (Exception e) {
      return List.of(); // not one of ours
    }
    String id = marker.path("s").asText("") + "-" + marker.path("w").asText("");
    String kind = marker.path("m").asText("");
    lock.lock();
    try {
      if (window == null || !window.id.equals(id)) {
        return List.of(); // an older window, or another source's
      }
      if (kind.equals("lw")) {
        window.lwSeen = true;
        window.startSeq = history.nextSeq();
        return List.of();
      }
      if (!kind.equals("hw") || window.chunk == null) {
        return List.of();
      }
      Window w = window;
      window = null;
      changed.signalAll();
      if (w.repeat || !w.lwSeen) {
        LOG.info("snapshot of {}: the table's shape changed inside the window; reading the chunk again",
            tables.get(w.table).qualifiedName());
        return List.of();
      }
      return closeWindow(w, m.lsn());
    } finally {
      lock.unlock();
    }
  }

  /** At HW, under the lock: the surviving rows and the fills, and the progress past this chunk. */
  private List<SourceEvent> closeWindow(Window w, long hwLsn) {
    ChunkReader.Chunk chunk = w.chunk;
    SnapshotHistory.AtHighWatermark at = history.eventsAt(chunk, tables.get(w.table), w.table, w.startSeq, hwLsn,
        events);
    boolean tableDone = chunk.rows().size() < chunkRows;
    if (!chunk.rows().isEmpty()) {
      last = ChunkReader.key(chunk.shape(), chunk.rows().get(chunk.rows().size() - 1));
      tableDone |= last.equals(max);
    }
    if (tableDone) {
      nextTable();
    }
    history.prune(table, chunk.visibility());
    if (at.rows() > 0) {
      rowsCounter.accept(at.rows());
    }
    return at.events();
  }

  private void nextTable() {
    table++;
    last = null;
    max = null;
    maxKnown = false;
    if (table >= tables.size()) {
      done = true;
      finished = true;
      history.clear();
    }
    changed.signalAll();
  }

  // ---------------------------------------------------------------- the chunk thread

  /** Starts the chunk thread (once; after {@link #restore}). Returns at once; nothing to do when {@link #done()}. */
  @Override
  public void start() {
    if (closed.get() || !started.compareAndSet(false, true)) {
      return;
    }
    Thread th = threads.apply(this::run);
    thread = th;
    th.start();
  }

  /** Stops the chunk thread and closes its connection; waits up to 10 s. Idempotent. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    lock.lock();
    try {
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    Thread th = thread;
    if (th != null && th != Thread.currentThread()) {
      th.interrupt();
      try {
        th.join(CLOSE_WAIT_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (th.isAlive()) {
        LOG.warn("snapshot thread {} still running {} ms after close", th.getName(), CLOSE_WAIT_MS);
      }
    }
  }

  private void run() {
    long backoff = 100;
    while (!closed.get()) {
      try {
        if (!step()) {
          break;
        }
        backoff = 100;
      } catch (InterruptedException e) {
        if (closed.get()) {
          break;
        }
      } catch (SQLException | RuntimeException e) {
        abandonWindow();
        closeConnection();
        if (closed.get()) {
          break;
        }
        // a server error's text can quote values: only its SQLSTATE; our own errors name the table and the fix
        String why = e instanceof SQLException s ? "SQLSTATE " + s.getSQLState() : e.getMessage();
        LOG.warn("snapshot chunk failed ({}: {}); retrying in {} ms", e.getClass().getSimpleName(), why, backoff);
        try {
          Thread.sleep(backoff);
        } catch (InterruptedException ie) {
          if (closed.get()) {
            break;
          }
        }
        backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
      }
    }
    closeConnection();
  }

  /** One step: the table's maximum key, or one chunk with its window. False when the snapshot is done. */
  private boolean step() throws SQLException, InterruptedException {
    int idx;
    List<String> from;
    List<String> to;
    boolean needMax;
    lock.lock();
    try {
      while (window != null && !closed.get()) {
        changed.await(1, TimeUnit.SECONDS);
      }
      if (closed.get() || done) {
        return false;
      }
      idx = table;
      from = last;
      to = max;
      needMax = !maxKnown;
    } finally {
      lock.unlock();
    }
    Connection c = connection();
    SnapshotTable t = tables.get(idx);
    if (!keysLoaded) {
      Map<Integer, List<String>> keys = new HashMap<>();
      for (int i = idx; i < tables.size(); i++) {
        keys.put(i, ChunkReader.shape(c, tables.get(i)).keyNames());
      }
      lock.lock();
      try {
        keyNamesByTable.putAll(keys);
      } finally {
        lock.unlock();
      }
      keysLoaded = true;
    }
    if (needMax) {
      List<String> m = ChunkReader.maxKey(c, t);
      lock.lock();
      try {
        if (table == idx && !maxKnown) {
          max = m;
          maxKnown = true;
          if (m == null || m.equals(last)) {
            nextTable();
          }
        }
      } finally {
        lock.unlock();
      }
      return true;
    }
    String id;
    lock.lock();
    try {
      if (table != idx || window != null) {
        return true;
      }
      id = nonce + "-" + (++windowCount);
      window = new Window(id, idx);
    } finally {
      lock.unlock();
    }
    ChunkReader.emit(c, id, "lw");
    ChunkReader.Chunk chunk = ChunkReader.read(c, t, from, to, chunkRows, events::prepare);
    lock.lock();
    try {
      if (window == null || !window.id.equals(id)) {
        return true;
      }
      window.chunk = chunk;
    } finally {
      lock.unlock();
    }
    ChunkReader.emit(c, id, "hw");
    lock.lock();
    try {
      while (window != null && window.id.equals(id) && !closed.get()) {
        changed.await(1, TimeUnit.SECONDS);
      }
    } finally {
      lock.unlock();
    }
    return true;
  }

  private void abandonWindow() {
    lock.lock();
    try {
      window = null;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  private Connection connection() throws SQLException {
    if (conn == null || conn.isClosed()) {
      Connection c = connector.open();
      try {
        c.setAutoCommit(true);
        settings.apply(c);
      } catch (SQLException | RuntimeException e) {
        c.close();
        throw e;
      }
      conn = c;
    }
    return conn;
  }

  private void closeConnection() {
    Connection c = conn;
    conn = null;
    if (c != null) {
      try {
        c.close();
      } catch (SQLException e) {
        LOG.debug("closing the snapshot connection failed (SQLSTATE {})", e.getSQLState());
      }
    }
  }

  // ---------------------------------------------------------------- keys

  /** The key of a stream change, by the table's key column names (the relation's flags may be FULL). */
  private List<String> keyFromStream(int i, PgMessage.Relation relation, PgMessage.Tuple tuple) {
    List<String> keyNames = keyNames(i, relation);
    String[] k = new String[keyNames.size()];
    List<String> names = names(relation);
    for (int j = 0; j < k.length; j++) {
      int c = names.indexOf(keyNames.get(j));
      if (c < 0 || c >= tuple.size() || tuple.kinds()[c] == 'u') {
        return null;
      }
      k[j] = tuple.texts()[c];
    }
    return Collections.unmodifiableList(Arrays.asList(k));
  }

  /**
   * The key column names of a table as the catalog names them (loaded by the chunk thread before its first
   * window), or, before that, the relation's key flags: identical unless the identity is FULL.
   */
  private List<String> keyNames(int i, PgMessage.Relation relation) {
    Window w = window;
    if (w != null && w.table == i && w.chunk != null) {
      keyNamesByTable.put(i, w.chunk.shape().keyNames());
    }
    List<String> known = keyNamesByTable.get(i);
    if (known != null) {
      return known;
    }
    List<String> flagged = new ArrayList<>();
    for (PgMessage.Relation.Column c : relation.columns()) {
      if (c.key()) {
        flagged.add(c.name());
      }
    }
    return flagged;
  }

  private static List<String> names(PgMessage.Relation relation) {
    List<String> out = new ArrayList<>(relation.columns().size());
    for (PgMessage.Relation.Column c : relation.columns()) {
      out.add(c.name());
    }
    return out;
  }

  private static List<String> keyOf(JsonNode a) {
    if (a == null || !a.isArray()) {
      return null;
    }
    String[] k = new String[a.size()];
    for (int i = 0; i < k.length; i++) {
      k[i] = a.get(i).isNull() ? null : a.get(i).asText();
    }
    return Collections.unmodifiableList(Arrays.asList(k));
  }

  private static JsonNode keyJson(List<String> key) {
    if (key == null) {
      return null;
    }
    ArrayNode a = JSON.createArrayNode();
    key.forEach(a::add);
    return a;
  }


}
