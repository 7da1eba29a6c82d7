package io.queen.pgconn.internal.source;

import io.queen.pgconn.internal.spec.SourceSpec;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/** The {@link Codec} over the decoding room: {@link PgOutputDecoder}, {@link Values}, {@link ChangeEvents} and the rest. */
final class DecoderCodec implements Codec {
  private final TypeRegistry types = new TypeRegistry();
  private final ChangeEvents events = new ChangeEvents(types);

  @Override
  public PgMessage decode(ByteBuffer buffer) {
    return PgOutputDecoder.decode(buffer);
  }

  @Override
  public void applySession(Connection c) throws SQLException {
    Values.apply(c);
  }

  @Override
  public String formatLsn(long lsn) {
    return PgLsn.format(lsn);
  }

  @Override
  public long parseLsn(String text) {
    return PgLsn.parse(text);
  }

  @Override
  public String newEpoch() {
    return MessageIds.newEpoch();
  }

  @Override
  public String changeId(String epoch, long commitLsn, int seq) {
    return MessageIds.change(epoch, commitLsn, seq);
  }

  @Override
  public String changeSecondId(String epoch, long commitLsn, int seq) {
    return MessageIds.changeSecond(epoch, commitLsn, seq);
  }

  @Override
  public void learn(PgMessage.Type type) {
    types.learn(type);
  }

  @Override
  public PgMessage.Relation resolve(Connection c, PgMessage.Relation relation) throws SQLException {
    List<Integer> oids = new ArrayList<>();
    relation.columns().forEach(col -> oids.add(col.typeOid()));
    types.resolve(c, oids);
    return ChangeEvents.withRowKey(c, relation);
  }

  @Override
  public ChangeEvents.Event event(String op, PgMessage.Relation relation, PgMessage.Tuple before, PgMessage.Tuple after,
      long lsn, long xid, long commitTimeMicros, int seq) {
    return events.event(op.charAt(0), relation, before, after, lsn, xid, commitTimeMicros, seq);
  }

  @Override
  public String partition(PgMessage.Relation relation, PgMessage.Tuple tuple, SourceSpec.Table table) {
    return events.partition(relation, tuple, table.single() ? List.of("single") : table.partitionBy());
  }
}
