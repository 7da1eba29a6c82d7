package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * The seam between the stream and the chunked snapshot (DBLog watermarks). The stream calls it
 * on the thread that builds Queen transactions, in commit order; the snapshot reads its chunks on a thread
 * of its own and writes its watermarks with {@code pg_logical_emit_message(false, PREFIX, <id>, true)}.
 */
public interface SnapshotHook {
  /** Prefix of the snapshot's WAL markers ({@code pg_logical_emit_message}). */
  String PREFIX = "queen-snap";

  /**
   * A change the stream is about to push (commit order). {@code xid} is the source transaction id (Begin's
   * 32 bits); the snapshot drops a buffered row whose key a change inside the open window touched.
   * {@code keyTuple} holds the key this event is about: the new row for an insert or update, the old key for a
   * delete. An update that changes the key is reported for both keys (its {@code d} and {@code c}, or twice
   * with the old key tuple and the new row when it stays one {@code u}). The event's {@code unchanged} names the
   * TOASTed columns it did not carry.
   */
  void onChange(PgMessage.Relation relation, PgMessage.Tuple keyTuple, long xid, SourceEvent event);

  /**
   * A logical message with prefix {@link #PREFIX} at {@code m.lsn()}. Returns the events to push in the same
   * Queen transaction that moves the pointer past this marker (the chunk's surviving rows and its fill events
   * at a high watermark; nothing otherwise).
   */
  List<SourceEvent> onMarker(PgMessage.LogicalMessage m);

  /** The snapshot's progress, stored in the pointer with every commit (opaque to the stream). */
  JsonNode progress();

  /** At start: the progress the last pointer held (null: the snapshot has not begun). */
  void restore(JsonNode progress);

  /** Whether every table has been copied (the phase is {@code streaming}, not {@code snapshot}). */
  boolean done();

  /** After {@link #restore} and once the stream runs: starts the snapshot's own work (its chunk thread). */
  default void start() {}

  /** When the stream stops: stops that work. Idempotent. */
  default void close() {}
}
