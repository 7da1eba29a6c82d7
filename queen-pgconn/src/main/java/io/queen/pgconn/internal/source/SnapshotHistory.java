package io.queen.pgconn.internal.source;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What the snapshot remembers of the stream's changes to tables it has still to copy, and the dedupe at a chunk's
 * high watermark that uses it. Not thread-safe: the snapshot calls it under its lock.
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
 * {@code unchanged} (ids {@code ...:f<seq>}). A row deleted at the end gets none.
 */
final class SnapshotHistory {
  /** One change the stream reported for a table still to copy. */
  private record Touch(long seq, long xid, int table, List<String> key, Set<String> unchanged, boolean delete) {}

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

  /** The events of a chunk at its HW, and how many of them are {@code r} rows (the rest are fills). */
  record AtHighWatermark(List<SourceEvent> events, int rows) {}

  private final ArrayDeque<Touch> touches = new ArrayDeque<>();
  private long seq;

  /** The sequence number the next change gets: a window opened now sees the changes from it on. */
  long nextSeq() {
    return seq;
  }

  /** A change of table {@code table} (its index) to {@code key}; {@code xid} as pgoutput sends it (32 bits). */
  void add(long xid, int table, List<String> key, Set<String> unchanged, boolean delete) {
    touches.addLast(new Touch(seq++, xid & 0xFFFF_FFFFL, table, key, Set.copyOf(unchanged), delete));
  }

  void clear() {
    touches.clear();
  }

  /**
   * Forgets the changes of tables before {@code firstTable} (copied) and those older than the chunk's {@code xmin}
   * (visible to every later chunk).
   */
  void prune(int firstTable, ChunkReader.Visibility visibility) {
    long xmin = visibility.xmin();
    touches.removeIf(touch -> touch.table() < firstTable || visibility.widen(touch.xid()) < xmin);
  }

  /**
   * At the HW of a chunk of table {@code t} (index {@code table}), for a window that saw the changes from {@code
   * startSeq} on: the chunk's rows no change made stale, as {@code r} events, then a fill for each row the window
   * saw only through updates that left TOASTed columns unchanged.
   */
  AtHighWatermark eventsAt(ChunkReader.Chunk chunk, SnapshotTable t, int table, long startSeq, long hwLsn,
      ChunkEvents events) {
    Map<List<String>, Trace> stale = new HashMap<>();
    for (Touch touch : touches) {
      if (touch.table() == table && (touch.seq() >= startSeq || chunk.visibility().invisible(touch.xid()))) {
        stale.computeIfAbsent(touch.key(), k -> new Trace()).apply(touch);
      }
    }
    List<SourceEvent> out = new ArrayList<>();
    Map<List<String>, PgMessage.Tuple> byKey = new LinkedHashMap<>();
    int seq = 0;
    for (PgMessage.Tuple row : chunk.rows()) {
      List<String> key = ChunkReader.key(chunk.shape(), row);
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
    return new AtHighWatermark(out, rows);
  }
}
