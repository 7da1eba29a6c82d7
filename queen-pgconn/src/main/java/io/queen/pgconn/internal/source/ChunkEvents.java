package io.queen.pgconn.internal.source;

import java.sql.Connection;
import java.sql.SQLException;

/**
 * Builds the snapshot's events exactly as the stream builds its own (values, partition, message id).
 * {@code shape} is the table as the chunk read it (columns in order, key flags on the key columns);
 * {@code row} holds every column's text ('t' or 'n'), or for a fill 'u' on the columns it does not carry.
 */
interface ChunkEvents {
  /** An {@code r} event, id {@code pg:<epoch>:s:<position>:<seq>}. */
  SourceEvent read(SnapshotTable table, PgMessage.Relation shape, PgMessage.Tuple row, long lsn, long tsMicros,
      long position, int seq);

  /**
   * A fill: an ordinary {@code u} of {@code fill} (the 'u' columns in {@code unchanged}), id {@code ...:f<seq>};
   * {@code row} is the chunk's whole row, for the partition.
   */
  SourceEvent fill(SnapshotTable table, PgMessage.Relation shape, PgMessage.Tuple row, PgMessage.Tuple fill, long lsn,
      long tsMicros, long position, int seq);

  /** On the chunk thread, before the chunk's rows are read: e.g. resolve the shape's non-built-in types. */
  default void prepare(Connection c, PgMessage.Relation shape) throws SQLException {}
}
