package io.queen.pgconn.internal.source;

import io.queen.pgconn.internal.spec.SourceSpec;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.SQLException;

/**
 * What the stream uses of the decoding room (the pgoutput decoder, LSN text, value rendering, partitions, message
 * ids and change events), in one place, so the stream holds no decoding of its own. One instance per stream; the
 * type cache it keeps is used by the committer thread only, {@link #decode} by the I/O thread only.
 */
interface Codec {
  /** A pgoutput message (the buffer's position to its limit). */
  PgMessage decode(ByteBuffer buffer);

  /** The session settings both connections run with (UTC, DateStyle, IntervalStyle, bytea_output). */
  void applySession(Connection c) throws SQLException;

  /** {@code 0/1526990}. */
  String formatLsn(long lsn);

  /** The inverse of {@link #formatLsn}. */
  long parseLsn(String text);

  /** A fresh epoch for message ids. */
  String newEpoch();

  /** {@code pg:<epoch>:<commit LSN, 16 hex>:<seq>}. */
  String changeId(String epoch, long commitLsn, int seq);

  /** The same with {@code .1}: a key change's second event. */
  String changeSecondId(String epoch, long commitLsn, int seq);

  /** A non-built-in type announced by the stream. */
  void learn(PgMessage.Type type);

  /**
   * Resolves the relation's column types the cache does not know yet (on the normal connection), and returns the
   * relation with its row key flagged (under REPLICA IDENTITY FULL pgoutput flags every column; the primary key
   * is the row key).
   */
  PgMessage.Relation resolve(Connection c, PgMessage.Relation relation) throws SQLException;

  /** The change event object, as JSON text. {@code op}: c, u, d. */
  ChangeEvents.Event event(String op, PgMessage.Relation relation, PgMessage.Tuple before, PgMessage.Tuple after, long lsn,
      long xid, long commitTimeMicros, int seq);

  /** The partition of a row's change: its key as printed, the {@code partitionBy} columns, or {@code all}. */
  String partition(PgMessage.Relation relation, PgMessage.Tuple tuple, SourceSpec.Table table);
}
