package io.queen.pgconn.internal.source;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The snapshot's events built by the same rules as the stream's ({@link ChangeEvents}, {@link Values},
 * {@link PartitionKeys}, {@link MessageIds}): an {@code r} of a chunk row prints exactly as a {@code c} of the
 * same row. No {@code xid}; {@code lsn} is the HW marker's, {@code ts} the chunk's read time. Its own
 * {@link TypeRegistry}, resolved on the chunk thread ({@link #prepare}); the events are built on the stream's.
 */
final class SnapshotEvents implements ChunkEvents {
  private final String epoch;
  private final TypeRegistry types = new TypeRegistry();
  private final ChangeEvents events = new ChangeEvents(types);

  SnapshotEvents(String epoch) {
    this.epoch = Objects.requireNonNull(epoch, "epoch must not be null");
  }

  @Override
  public void prepare(Connection c, PgMessage.Relation shape) throws SQLException {
    List<Integer> oids = new ArrayList<>();
    shape.columns().forEach(col -> oids.add(col.typeOid()));
    types.resolve(c, oids);
  }

  @Override
  public SourceEvent read(SnapshotTable table, PgMessage.Relation shape, PgMessage.Tuple row, long lsn,
      long tsMicros, long position, int seq) {
    return new SourceEvent(table.queue(), partition(table, shape, row), MessageIds.snapshot(epoch, position, seq),
        events.event('r', shape, null, row, lsn, null, tsMicros, seq));
  }

  @Override
  public SourceEvent fill(SnapshotTable table, PgMessage.Relation shape, PgMessage.Tuple row,
      PgMessage.Tuple fill, long lsn, long tsMicros, long position, int seq) {
    return new SourceEvent(table.queue(), partition(table, shape, row), MessageIds.fill(epoch, position, seq),
        events.event('u', shape, null, fill, lsn, null, tsMicros, seq));
  }

  private String partition(SnapshotTable table, PgMessage.Relation shape, PgMessage.Tuple row) {
    return events.partition(shape, row, table.single() ? List.of("single") : table.partitionBy());
  }
}
