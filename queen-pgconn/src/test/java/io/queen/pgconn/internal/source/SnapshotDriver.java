package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.pgconn.internal.spec.Ident;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Plays the stream for a {@link ChunkedSnapshot} without the stream runtime: a logical slot read with SQL
 * ({@link DecodingSlot}), decoded with {@link PgOutputDecoder}, each change handed to {@code onChange} and each
 * {@code queen-snap} marker to {@code onMarker} in commit order, on one thread of its own; every event (the
 * stream's and the snapshot's) is collected in push order.
 */
final class SnapshotDriver implements AutoCloseable {
  static final ObjectMapper M = new ObjectMapper();

  /** Events as the tests build them: values as PostgreSQL's text, partition = key texts joined with '|'. */
  static final class TestEvents implements ChunkEvents {
    @Override
    public SourceEvent read(SnapshotTable table, PgMessage.Relation shape, PgMessage.Tuple row, long lsn,
        long tsMicros, long position, int seq) {
      return event("r", table, shape, row, lsn, tsMicros, seq, "pg:test:s:" + PgLsn.hex16(position) + ":" + seq);
    }

    @Override
    public SourceEvent fill(SnapshotTable table, PgMessage.Relation shape, PgMessage.Tuple row,
        PgMessage.Tuple fill, long lsn, long tsMicros, long position, int seq) {
      return event("u", table, shape, fill, lsn, tsMicros, seq, "pg:test:s:" + PgLsn.hex16(position) + ":f" + seq);
    }
  }

  static SourceEvent event(String op, SnapshotTable table, PgMessage.Relation rel, PgMessage.Tuple row,
      long lsn, long tsMicros, int seq, String id) {
    ObjectNode p = M.createObjectNode();
    p.put("op", op);
    p.put("table", table.qualifiedName());
    ObjectNode key = p.putObject("key");
    ObjectNode after = M.createObjectNode();
    var unchanged = M.createArrayNode();
    List<String> unchangedNames = new ArrayList<>();
    List<String> keyTexts = new ArrayList<>();
    for (int i = 0; i < rel.columns().size(); i++) {
      PgMessage.Relation.Column c = rel.columns().get(i);
      char k = row.kinds()[i];
      if (k == 'u') {
        unchanged.add(c.name());
        unchangedNames.add(c.name());
        continue;
      }
      if (c.key()) {
        key.put(c.name(), row.texts()[i]);
        keyTexts.add(row.texts()[i]);
      }
      after.put(c.name(), row.texts()[i]);
    }
    if (op.equals("d")) {
      p.putNull("after");
      p.set("before", key.deepCopy());
    } else {
      p.set("after", after);
      p.putNull("before");
    }
    p.set("unchanged", unchanged);
    p.put("lsn", PgLsn.format(lsn));
    p.put("ts", tsMicros);
    p.put("seq", seq);
    return new SourceEvent("q_" + table.name(), String.join("|", keyTexts), id, op.charAt(0),
        List.copyOf(unchangedNames), p.toString());
  }

  final DecodingSlot slot;
  final AtomicReference<ChunkedSnapshot> hook = new AtomicReference<>();
  final List<SourceEvent> pushed = new ArrayList<>(); // guarded by this
  final List<JsonNode> progressAtHw = new ArrayList<>(); // guarded by this
  int markers; // guarded by this
  int hws; // guarded by this; markers that returned events or closed a window of the current hook
  volatile int pauseAfterHws = Integer.MAX_VALUE;
  private final ArrayDeque<PgMessage> pending = new ArrayDeque<>();
  private final Map<Integer, PgMessage.Relation> relations = new HashMap<>();
  private long xid;
  private long commitLsn;
  private int seq;
  private volatile boolean running = true;
  private final Thread thread;

  SnapshotDriver(Connection c, SnapshotTable... tables) throws SQLException {
    this.slot = new DecodingSlot(c, java.util.Arrays.stream(tables)
        .map(t -> Ident.quoteCatalogName(t.schema()) + "." + Ident.quoteCatalogName(t.name())).toArray(String[]::new));
    this.thread = new Thread(this::loop, "snapshot-driver");
  }

  void start(ChunkedSnapshot h) {
    hook.set(h);
    thread.start();
  }

  private void loop() {
    while (running) {
      try {
        pump();
        Thread.sleep(20);
      } catch (InterruptedException e) {
        return;
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    }
  }

  /** Reads what the slot has and dispatches it, stopping (keeping the rest) once paused. */
  synchronized void pump() throws SQLException {
    if (pending.isEmpty()) {
      pending.addAll(slot.messages());
    }
    while (!pending.isEmpty() && hws < pauseAfterHws) {
      dispatch(pending.poll());
    }
  }

  private void dispatch(PgMessage m) {
    ChunkedSnapshot h = hook.get();
    if (m instanceof PgMessage.Begin b) {
      xid = b.xid();
      commitLsn = b.finalLsn();
      seq = 0;
    } else if (m instanceof PgMessage.Relation r) {
      relations.put(r.oid(), r);
    } else if (m instanceof PgMessage.Insert i) {
      change("c", relations.get(i.relationOid()), i.after(), i.after());
    } else if (m instanceof PgMessage.Update u) {
      PgMessage.Relation rel = relations.get(u.relationOid());
      if (u.before() != null && u.oldKind() == 'K') {
        change("d", rel, u.before(), u.before());
        change("c", rel, u.after(), u.after());
      } else {
        change("u", rel, u.after(), u.after());
      }
    } else if (m instanceof PgMessage.Delete d) {
      change("d", relations.get(d.relationOid()), d.before(), d.before());
    } else if (m instanceof PgMessage.LogicalMessage lm && lm.prefix().equals(SnapshotHook.PREFIX)) {
      markers++;
      JsonNode before = h.progress();
      List<SourceEvent> out = h.onMarker(lm);
      pushed.addAll(out);
      if (!out.isEmpty() || !before.equals(h.progress())) {
        hws++;
        progressAtHw.add(h.progress());
      }
    }
  }

  private void change(String op, PgMessage.Relation rel, PgMessage.Tuple keyTuple, PgMessage.Tuple row) {
    SnapshotTable t = new SnapshotTable(rel.schema(), rel.name(), "q_" + rel.name(), List.of(), false);
    SourceEvent e = event(op, t, rel, row, commitLsn, 0, seq, "pg:test:" + PgLsn.hex16(commitLsn) + ":" + seq);
    seq++;
    hook.get().onChange(rel, keyTuple, xid, e);
    pushed.add(e);
  }

  synchronized List<SourceEvent> events() {
    return List.copyOf(pushed);
  }

  synchronized List<JsonNode> progress() {
    return List.copyOf(progressAtHw);
  }

  synchronized int markers() {
    return markers;
  }

  /** Stops the reading thread, then reads and dispatches whatever is left in the slot. */
  void drain() throws Exception {
    running = false;
    thread.join(10_000);
    pauseAfterHws = Integer.MAX_VALUE;
    pump();
    pump();
  }

  @Override
  public void close() throws Exception {
    running = false;
    thread.interrupt();
    thread.join(10_000);
    slot.close();
  }
}
