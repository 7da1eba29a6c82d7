package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The source's initial snapshot: each table read in key order, {@code chunkRows} rows at a time, while the stream
 * keeps running, with DBLog watermarks. A {@link SnapshotHook} the stream drives.
 *
 * <p><b>One chunk.</b> On a thread of its own (never the stream's), the snapshot writes a low watermark (LW) into
 * the WAL with {@code pg_logical_emit_message(false, 'queen-snap', '{"s":..,"w":..,"m":"lw"}', true)} (non-
 * transactional, so it arrives at its WAL position), reads the chunk in a short REPEATABLE READ transaction of its
 * own on a normal connection of the source database ({@code WHERE (k1,k2) > (last) AND (k1,k2) <= (max) ORDER BY
 * k1,k2 LIMIT n}, every column as its type's output function prints it ({@code format('%s', col)}, as pgoutput
 * does; not {@code col::text}, which prints some types differently) under the walsender's session settings, plus
 * {@code pg_current_snapshot()} and the read time), buffers the rows and writes the high watermark (HW). The next
 * chunk starts only after this HW came back through the stream: one window is open at a time, and no transaction
 * stays open longer than one chunk's read, so VACUUM is never held back.
 *
 * <p><b>Dedupe.</b> At HW (on the stream's thread, in commit order) a buffered row is dropped when its key was
 * touched by a change between LW and HW (the stream's version is newer), or by an already-emitted change whose
 * transaction the chunk's snapshot could not see (its xid in {@code xip} or {@code >= xmax}): PostgreSQL writes a
 * commit record before the transaction becomes visible, so a transaction can be decoded before LW and still be
 * invisible to the chunk, whose older row would then follow the newer event. For that the snapshot keeps a short
 * history of every change to a table it has still to copy (xid, key, the TOASTed columns left {@code u}),
 * pruned at each HW back to the chunk snapshot's {@code xmin}: older xids are visible to every later chunk.
 * pgoutput's xids are 32 bits and {@code pg_current_snapshot()}'s are xid8; a 32-bit xid is widened against the
 * snapshot's {@code xmax} (they are never 2^31 apart). No xid is forced for the chunk's own transaction: the
 * watermarks are WAL positions and the visibility rule concerns other transactions only, so a read-only
 * transaction is enough.
 *
 * <p><b>Events at HW.</b> The surviving rows become {@code r} events (lsn = the HW marker's, ts = the chunk's
 * read time, ids {@code pg:<epoch>:s:<HW LSN, 16 hex>:<seq>}), followed by fill events for rows the window saw
 * only through updates that left TOASTed columns unchanged: an ordinary {@code u} whose {@code after} holds the
 * key and the columns every such change left {@code u}, read from the chunk, every other column in
 * {@code unchanged} (ids {@code ...:f<seq>}). A row deleted at the end gets none. The stream pushes them in the
 * Queen transaction that moves the pointer past HW, together with {@link #progress()}, which then already names
 * the chunk's last key: a crash repeats at most that chunk.
 *
 * <p><b>Progress</b> ({@code {"table":i,"name":"s.t","last":[..],"max":[..],"done":b}}): the table's index in
 * document order, the last key read, the table's maximum key taken when its copy began (the snapshot stops
 * there; later rows come through the stream) and whether every table is copied. {@link #restore(JsonNode)} with
 * null starts clean (a first start, or a resync's new epoch). Markers of an older window (written before a
 * restart, or by another source of the same database) carry another window id and are ignored.
 *
 * <p><b>Schema change.</b> A Relation for the window's table inside the window ({@link #onRelation}, or a change
 * whose relation's columns differ from the chunk's) discards the buffer; the same chunk is read again.
 *
 * <p><b>Threads.</b> {@link #onChange}, {@link #onRelation}, {@link #onMarker}, {@link #progress()},
 * {@link #restore} and {@link #done()} may be called from any thread (the stream calls them from the one that
 * builds Queen transactions); {@link #restore} before {@link #start()}. {@link #start()} starts the chunk thread,
 * {@link #close()} stops it (idempotent, bounded).
 *
 * <p>Needs on the source: SELECT on the tables, and REPLICATION (or superuser) for
 * {@code pg_logical_emit_message}, which the source's role has anyway.
 */
public final class ChunkedSnapshot implements SnapshotHook, AutoCloseable {
  /** The default of the document's {@code snapshotChunkRows}. */
  public static final int DEFAULT_CHUNK_ROWS = 2_000;

  private static final Logger LOG = LoggerFactory.getLogger(ChunkedSnapshot.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long MAX_BACKOFF_MS = 5_000;
  private static final long CLOSE_WAIT_MS = 10_000;

  /** One table of the source, in document order: where its rows go and how they are partitioned. */
  public record Table(String schema, String name, String queue, List<String> partitionBy, boolean single) {
    public Table {
      Objects.requireNonNull(schema, "schema must not be null");
      Objects.requireNonNull(name, "name must not be null");
      Objects.requireNonNull(queue, "queue must not be null");
      partitionBy = List.copyOf(partitionBy);
    }

    /** {@code schema.name}, as in the events' {@code table} field. */
    public String qualifiedName() {
      return schema + "." + name;
    }
  }

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

  /**
   * Builds the snapshot's events exactly as the stream builds its own (values, partition, message id).
   * {@code shape} is the table as the chunk read it (columns in order, key flags on the key columns);
   * {@code row} holds every column's text ('t' or 'n'), or for a fill 'u' on the columns it does not carry.
   */
  public interface Events {
    /** An {@code r} event, id {@code pg:<epoch>:s:<position>:<seq>}. */
    SourceEvent read(Table table, PgMessage.Relation shape, PgMessage.Tuple row, long lsn, long tsMicros,
        long position, int seq);

    /**
     * A fill: an ordinary {@code u} of {@code fill} (the 'u' columns in {@code unchanged}), id {@code ...:f<seq>};
     * {@code row} is the chunk's whole row, for the partition.
     */
    SourceEvent fill(Table table, PgMessage.Relation shape, PgMessage.Tuple row, PgMessage.Tuple fill, long lsn,
        long tsMicros, long position, int seq);

    /** On the chunk thread, before the chunk's rows are read: e.g. resolve the shape's non-built-in types. */
    default void prepare(Connection c, PgMessage.Relation shape) throws SQLException {}
  }

  /** The chunk's view of other transactions: {@code pg_current_snapshot()} as xid8 values. */
  record Visibility(long xmin, long xmax, Set<Long> xip) {
    Visibility {
      xip = Set.copyOf(xip);
    }

    /** Whether a committed transaction with this 32-bit (pgoutput) xid was invisible to the snapshot. */
    boolean invisible(long xid32) {
      return xip.contains(widen(xid32)) || widen(xid32) >= xmax;
    }

    /** The xid8 of a 32-bit xid, taken within 2^31 of {@code xmax} (xids that far apart cannot coexist). */
    long widen(long xid32) {
      int diff = (int) ((xid32 & 0xFFFF_FFFFL) - (xmax & 0xFFFF_FFFFL));
      return xmax + diff;
    }
  }

  /** A table's shape as one chunk transaction read it from the catalog. */
  record Shape(PgMessage.Relation relation, int[] keyIdx, String[] castTypes) {
    List<String> keyNames() {
      List<String> out = new ArrayList<>(keyIdx.length);
      for (int k : keyIdx) {
        out.add(relation.columns().get(k).name());
      }
      return List.copyOf(out);
    }

    List<String> columnNames() {
      List<String> out = new ArrayList<>(relation.columns().size());
      for (PgMessage.Relation.Column c : relation.columns()) {
        out.add(c.name());
      }
      return out;
    }
  }

  /** What one chunk transaction read. */
  record Chunk(Shape shape, List<PgMessage.Tuple> rows, Visibility visibility, long readMicros) {}

  /** One change the stream reported for a table still to copy. */
  private record Touch(long seq, long xid, int table, List<String> key, Set<String> unchanged, boolean delete) {}

  /** The open window; fields guarded by {@link #lock}. */
  private static final class Window {
    final String id;
    final int table;
    boolean lwSeen;
    long startSeq;
    Chunk chunk;
    boolean repeat;

    Window(String id, int table) {
      this.id = id;
      this.table = table;
    }
  }

  /** How one key fared across the changes that make the chunk's row stale. */
  private static final class Trace {
    Set<String> unchanged;
    boolean deleted;

    void apply(Touch t) {
      if (unchanged == null) {
        unchanged = new HashSet<>(t.unchanged());
      } else {
        unchanged.retainAll(t.unchanged());
      }
      deleted = t.delete();
    }
  }

  private final List<Table> tables;
  private final Map<String, Integer> tableIndex = new HashMap<>();
  private final int chunkRows;
  private final Connector connector;
  private final SessionSettings settings;
  private final Events events;
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
  private final ArrayDeque<Touch> history = new ArrayDeque<>();
  private long touchSeq;
  private final Map<Integer, List<String>> streamShapes = new HashMap<>();
  private final Map<Integer, List<String>> keyNamesByTable = new HashMap<>();

  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();
  private volatile Thread thread;
  private Connection conn; // chunk thread only
  private boolean keysLoaded; // chunk thread only

  /** Test seam: the chunk transaction imports this exported snapshot (reproduces the visibility race). */
  volatile String importSnapshot;
  /** Test seam: told "lw" once a low watermark is written, before the chunk is read. */
  volatile Consumer<String> phases = p -> {};

  /**
   * @param tables the source's tables in document order
   * @param chunkRows rows per chunk ({@code snapshotChunkRows}), at least 1
   * @param connector opens a normal connection to the source database
   * @param settings the walsender's output settings for that connection ({@code Values.apply})
   * @param events builds the events (the same rules as the stream's)
   * @param rowsCounter told how many {@code r} rows each chunk emitted ({@code queen_pg_source_snapshot_rows_total})
   * @param threads makes the chunk thread (named after the source, e.g. {@code pg-<connector>-snapshot})
   */
  public ChunkedSnapshot(List<Table> tables, int chunkRows, Connector connector, SessionSettings settings,
      Events events, LongConsumer rowsCounter, Function<Runnable, Thread> threads) {
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

  /**
   * The snapshot of a source: its tables in document order, {@code snapshotChunkRows}, events with the source's
   * epoch, rows counted into {@code queen_pg_source_snapshot_rows_total}.
   */
  static ChunkedSnapshot forSource(SourceSpec spec, String epoch, Connector normal,
      LongConsumer rows, Function<Runnable, Thread> threads) {
    List<Table> tables = new ArrayList<>();
    for (SourceSpec.Table t : spec.tables()) {
      tables.add(new Table(t.schema(), t.table(), t.queue(), t.partitionBy(), t.single()));
    }
    return new ChunkedSnapshot(tables, spec.snapshotChunkRows(), normal, Values::apply, new SnapshotEvents(epoch),
        rows, threads);
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

  /**
   * A Relation message (the stream calls this for each one, in commit order): inside the window, one for the
   * window's table means its shape may have changed, so the chunk is read again.
   */
  @Override
  public void onRelation(PgMessage.Relation relation) {
    Integer i = tableIndex.get(relation.schema() + "." + relation.name());
    if (i == null) {
      return;
    }
    lock.lock();
    try {
      List<String> names = names(relation);
      List<String> before = streamShapes.put(i, names);
      if (window != null && window.lwSeen && window.table == i && before != null && !before.equals(names)) {
        window.repeat = true;
      }
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
      history.addLast(new Touch(touchSeq++, xid & 0xFFFF_FFFFL, i, key, Set.copyOf(unchanged), op.equals("d")));
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
        window.startSeq = touchSeq;
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
    Chunk chunk = w.chunk;
    Table t = tables.get(w.table);
    Map<List<String>, Trace> stale = new HashMap<>();
    for (Touch touch : history) {
      if (touch.table() == w.table && (touch.seq() >= w.startSeq || chunk.visibility().invisible(touch.xid()))) {
        stale.computeIfAbsent(touch.key(), k -> new Trace()).apply(touch);
      }
    }
    List<SourceEvent> out = new ArrayList<>();
    Map<List<String>, PgMessage.Tuple> byKey = new LinkedHashMap<>();
    int seq = 0;
    for (PgMessage.Tuple row : chunk.rows()) {
      List<String> key = key(chunk.shape(), row);
      byKey.put(key, row);
      if (!stale.containsKey(key)) {
        out.add(events.read(t, chunk.shape().relation(), row, hwLsn, chunk.readMicros(), hwLsn, seq++));
      }
    }
    int rows = out.size();
    List<String> names = chunk.shape().columnNames();
    for (Map.Entry<List<String>, PgMessage.Tuple> e : byKey.entrySet()) {
      Trace trace = stale.get(e.getKey());
      if (trace == null || trace.deleted || trace.unchanged.isEmpty()) {
        continue;
      }
      PgMessage.Tuple row = e.getValue();
      char[] kinds = new char[row.size()];
      String[] texts = new String[row.size()];
      Arrays.fill(kinds, 'u');
      for (int c = 0; c < row.size(); c++) {
        boolean isKey = chunk.shape().relation().columns().get(c).key();
        if (isKey || trace.unchanged.contains(names.get(c))) {
          kinds[c] = row.kinds()[c];
          texts[c] = row.texts()[c];
        }
      }
      out.add(events.fill(t, chunk.shape().relation(), row, new PgMessage.Tuple(kinds, texts), hwLsn,
          chunk.readMicros(), hwLsn, seq++));
    }
    // progress past this chunk
    boolean tableDone = chunk.rows().size() < chunkRows;
    if (!chunk.rows().isEmpty()) {
      last = key(chunk.shape(), chunk.rows().get(chunk.rows().size() - 1));
      tableDone |= last.equals(max);
    }
    if (tableDone) {
      nextTable();
    }
    long xmin = chunk.visibility().xmin();
    history.removeIf(touch -> touch.table() < table || chunk.visibility().widen(touch.xid()) < xmin);
    if (rows > 0) {
      rowsCounter.accept(rows);
    }
    return out;
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
    Table t = tables.get(idx);
    if (!keysLoaded) {
      Map<Integer, List<String>> keys = new HashMap<>();
      for (int i = idx; i < tables.size(); i++) {
        keys.put(i, shape(c, tables.get(i)).keyNames());
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
      List<String> m = maxKey(c, t);
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
    emit(c, id, "lw");
    phases.accept("lw");
    Chunk chunk = readChunk(c, t, from, to);
    lock.lock();
    try {
      if (window == null || !window.id.equals(id)) {
        return true;
      }
      window.chunk = chunk;
    } finally {
      lock.unlock();
    }
    emit(c, id, "hw");
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

  private void emit(Connection c, String id, String kind) throws SQLException {
    int dash = id.lastIndexOf('-');
    String content = "{\"s\":\"" + id.substring(0, dash) + "\",\"w\":" + id.substring(dash + 1) + ",\"m\":\"" + kind
        + "\"}";
    try (PreparedStatement ps = c.prepareStatement("SELECT pg_logical_emit_message(false, ?, ?, true)")) {
      ps.setString(1, PREFIX);
      ps.setString(2, content);
      ps.executeQuery().close();
    }
  }

  /** The table's greatest key now (null: the table is empty), in its own short transaction. */
  private List<String> maxKey(Connection c, Table t) throws SQLException {
    c.setAutoCommit(false);
    try {
      Shape shape = shape(c, t);
      StringBuilder sql = new StringBuilder("SELECT ");
      StringBuilder order = new StringBuilder();
      for (int k = 0; k < shape.keyIdx().length; k++) {
        String col = "src." + Ident.quoteCatalogName(shape.relation().columns().get(shape.keyIdx()[k]).name());
        sql.append(k == 0 ? "" : ", ").append(SourceSetup.printed(col));
        order.append(k == 0 ? "" : ", ").append(col).append(" DESC");
      }
      sql.append(" FROM ").append(Ident.quoteCatalogName(t.schema())).append('.')
          .append(Ident.quoteCatalogName(t.name())).append(" AS src ORDER BY ")
          .append(order).append(" LIMIT 1");
      List<String> out = null;
      try (PreparedStatement ps = c.prepareStatement(sql.toString()); ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          out = new ArrayList<>();
          for (int k = 0; k < shape.keyIdx().length; k++) {
            out.add(rs.getString(k + 1));
          }
        }
      }
      c.commit();
      return out == null ? null : Collections.unmodifiableList(out);
    } catch (SQLException | RuntimeException e) {
      rollbackQuietly(c);
      throw e;
    } finally {
      c.setAutoCommit(true);
    }
  }

  /** One chunk in a short REPEATABLE READ transaction: its visibility first, then the rows in key order. */
  Chunk readChunk(Connection c, Table t, List<String> from, List<String> to) throws SQLException {
    c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
    c.setAutoCommit(false);
    try {
      Visibility vis;
      long readMicros;
      String imported = importSnapshot;
      if (imported != null) {
        try (PreparedStatement ps = c.prepareStatement("SET TRANSACTION SNAPSHOT " + literal(imported))) {
          ps.execute();
        }
      }
      try (PreparedStatement ps = c.prepareStatement("SELECT pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text,"
          + " ARRAY(SELECT pg_snapshot_xip(s)::text), (extract(epoch FROM now()) * 1000000)::bigint"
          + " FROM pg_current_snapshot() s");
          ResultSet rs = ps.executeQuery()) {
        rs.next();
        Set<Long> xip = new HashSet<>();
        Array a = rs.getArray(3);
        for (Object o : (Object[]) a.getArray()) {
          xip.add(Long.parseLong((String) o));
        }
        vis = new Visibility(Long.parseLong(rs.getString(1)), Long.parseLong(rs.getString(2)), xip);
        readMicros = rs.getLong(4);
      }
      Shape shape = shape(c, t);
      events.prepare(c, shape.relation());
      int n = shape.relation().columns().size();
      // columns qualified: an output column named like a key column must not capture ORDER BY (it is text)
      StringBuilder sql = new StringBuilder("SELECT ");
      for (int i = 0; i < n; i++) {
        sql.append(i == 0 ? "" : ", ")
            .append(SourceSetup.printed("src." + Ident.quoteCatalogName(shape.relation().columns().get(i).name())));
      }
      sql.append(" FROM ").append(Ident.quoteCatalogName(t.schema())).append('.')
          .append(Ident.quoteCatalogName(t.name())).append(" AS src");
      String keyRow = keyList(shape, false);
      List<String> params = new ArrayList<>();
      List<String> where = new ArrayList<>();
      if (from != null) {
        where.add("(" + keyRow + ") > (" + keyList(shape, true) + ")");
        params.addAll(from);
      }
      if (to != null) {
        where.add("(" + keyRow + ") <= (" + keyList(shape, true) + ")");
        params.addAll(to);
      }
      if (!where.isEmpty()) {
        sql.append(" WHERE ").append(String.join(" AND ", where));
      }
      sql.append(" ORDER BY ").append(keyRow).append(" LIMIT ").append(chunkRows);
      List<PgMessage.Tuple> rows = new ArrayList<>();
      try (PreparedStatement ps = c.prepareStatement(sql.toString())) {
        for (int p = 0; p < params.size(); p++) {
          ps.setString(p + 1, params.get(p));
        }
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            char[] kinds = new char[n];
            String[] texts = new String[n];
            for (int i = 0; i < n; i++) {
              texts[i] = rs.getString(i + 1);
              kinds[i] = texts[i] == null ? 'n' : 't';
            }
            rows.add(new PgMessage.Tuple(kinds, texts));
          }
        }
      }
      c.commit();
      return new Chunk(shape, rows, vis, readMicros);
    } catch (SQLException | RuntimeException e) {
      rollbackQuietly(c);
      throw e;
    } finally {
      c.setAutoCommit(true);
      c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
    }
  }

  private static String keyList(Shape shape, boolean params) {
    StringBuilder b = new StringBuilder();
    for (int k = 0; k < shape.keyIdx().length; k++) {
      b.append(k == 0 ? "" : ", ");
      if (params) {
        b.append("?::").append(shape.castTypes()[k]);
      } else {
        b.append("src.").append(Ident.quoteCatalogName(shape.relation().columns().get(shape.keyIdx()[k]).name()));
      }
    }
    return b.toString();
  }

  /**
   * The columns the walsender sends (not dropped, not generated, in attnum order) and the key: the replica
   * identity index when the table has one set, else the primary key.
   */
  static Shape shape(Connection c, Table t) throws SQLException {
    int oid;
    char ident;
    List<PgMessage.Relation.Column> cols = new ArrayList<>();
    List<String> types = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement("SELECT c.oid, c.relreplident, a.attname, a.atttypid,"
        + " a.atttypmod, format_type(a.atttypid, a.atttypmod) FROM pg_class c"
        + " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid"
        + " WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''"
        + " ORDER BY a.attnum")) {
      ps.setString(1, t.schema());
      ps.setString(2, t.name());
      try (ResultSet rs = ps.executeQuery()) {
        oid = 0;
        ident = 'd';
        while (rs.next()) {
          oid = rs.getInt(1);
          ident = rs.getString(2).charAt(0);
          cols.add(new PgMessage.Relation.Column(false, rs.getString(3), rs.getInt(4), rs.getInt(5)));
          types.add(rs.getString(6));
        }
      }
    }
    if (cols.isEmpty()) {
      throw new IllegalStateException("snapshot: table " + t.qualifiedName() + " does not exist (table_missing)");
    }
    List<String> keyNames = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement("SELECT a.attname FROM pg_index i"
        + " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
        + " WHERE i.indrelid = ? AND CASE WHEN ? = 'i' THEN i.indisreplident ELSE i.indisprimary END"
        + " ORDER BY array_position(i.indkey::int2[], a.attnum)")) {
      ps.setInt(1, oid);
      ps.setString(2, String.valueOf(ident));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          keyNames.add(rs.getString(1));
        }
      }
    }
    if (keyNames.isEmpty()) {
      throw new IllegalStateException("snapshot: table " + t.qualifiedName() + " has no primary key and no replica"
          + " identity index (no_key): add a primary key, or a unique index set as REPLICA IDENTITY USING INDEX");
    }
    int[] keyIdx = new int[keyNames.size()];
    String[] casts = new String[keyNames.size()];
    for (int k = 0; k < keyNames.size(); k++) {
      for (int i = 0; i < cols.size(); i++) {
        if (cols.get(i).name().equals(keyNames.get(k))) {
          keyIdx[k] = i;
          casts[k] = types.get(i);
          PgMessage.Relation.Column col = cols.get(i);
          cols.set(i, new PgMessage.Relation.Column(true, col.name(), col.typeOid(), col.typmod()));
        }
      }
    }
    return new Shape(new PgMessage.Relation(oid, t.schema(), t.name(), ident, List.copyOf(cols)), keyIdx, casts);
  }

  // ---------------------------------------------------------------- keys

  private static List<String> key(Shape shape, PgMessage.Tuple row) {
    String[] k = new String[shape.keyIdx().length];
    for (int i = 0; i < k.length; i++) {
      k[i] = row.texts()[shape.keyIdx()[i]];
    }
    return Collections.unmodifiableList(Arrays.asList(k));
  }

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

  private static String literal(String s) {
    if (!s.matches("[0-9A-Fa-f-]{1,64}")) {
      throw new IllegalArgumentException("not a snapshot id");
    }
    return "'" + s + "'";
  }

  private static void rollbackQuietly(Connection c) {
    try {
      c.rollback();
    } catch (SQLException e) {
      LOG.debug("rollback of a snapshot transaction failed (SQLSTATE {})", e.getSQLState());
    }
  }
}
