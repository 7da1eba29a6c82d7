package io.queen.pgconn.internal.source;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The change event of a row and its partition, alike for a snapshot row ({@code r}, its tuple read by
 * {@link ChunkReader}) and a streamed change, so an {@code r} and a {@code c} of one row carry identical values.
 *
 * <p>An event is one JSON object with its fields in this order: {@code op} ({@code r c u d}), {@code table}
 * ({@code schema.name}), {@code key} (the row key's columns), {@code after} (the new row without the
 * unchanged TOASTed columns; null for a delete), {@code before} (null unless there is an old tuple: the key
 * under default or index identity, the whole old row, NULLs included, under REPLICA IDENTITY FULL),
 * {@code unchanged} (names of the unchanged TOASTed columns, only when there are some), {@code lsn},
 * {@code xid} (absent for snapshot rows), {@code ts} (UTC, microseconds, {@code Z}) and {@code seq}.
 *
 * <p>The row key is the relation's columns flagged {@link PgMessage.Relation.Column#key()}. pgoutput flags
 * every column under REPLICA IDENTITY FULL, so pass such a relation through {@link #withRowKey} first;
 * the snapshot's shape ({@link ChunkReader#shape}) already flags the row key. Thread-safe (the registry is).
 */
final class ChangeEvents {
  private static final DateTimeFormatter TS =
      DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSS'Z'").withZone(ZoneOffset.UTC);

  private final TypeRegistry types;

  ChangeEvents(TypeRegistry types) {
    this.types = Objects.requireNonNull(types, "types must not be null");
  }

  /**
   * One change event: its JSON text, and what the snapshot's bookkeeping reads of it (the op and the unchanged
   * TOASTed columns), so nothing parses the text again.
   */
  record Event(char op, String json, List<String> unchanged) {}

  /**
   * The event of one change, written as JSON text (no tree of nodes in between).
   *
   * @param op {@code r} (snapshot row), {@code c}, {@code u} or {@code d}
   * @param before the old tuple ('K' or 'O'), or null; required for {@code d}
   * @param after the new tuple; null only for {@code d}
   * @param lsn the commit LSN (stream) or the snapshot's position LSN, printed as PostgreSQL prints it
   * @param xid the source transaction; null for snapshot rows (then absent from the event)
   * @param tsMicros commit time (or read time for a snapshot row), microseconds since the Unix epoch
   * @throws IllegalArgumentException for an op, tuple or relation that do not fit together
   */
  Event event(char op, PgMessage.Relation rel, PgMessage.Tuple before, PgMessage.Tuple after, long lsn, Long xid,
      long tsMicros, int seq) {
    Objects.requireNonNull(rel, "rel must not be null");
    switch (op) {
      case 'r', 'c', 'u' -> {
        if (after == null) {
          throw new IllegalArgumentException("a '" + op + "' event needs the new tuple");
        }
      }
      case 'd' -> {
        if (before == null || after != null) {
          throw new IllegalArgumentException("a 'd' event needs the old tuple and no new one");
        }
      }
      default -> throw new IllegalArgumentException("op must be r, c, u or d, got '" + op + "'");
    }
    check(rel, before);
    check(rel, after);
    List<PgMessage.Relation.Column> cols = rel.columns();

    StringBuilder b = new StringBuilder(256);
    b.append("{\"op\":\"").append(op).append("\",\"table\":");
    Values.string(b, rel.schema() + "." + rel.name());
    b.append(",\"key\":{");
    PgMessage.Tuple keySource = after != null ? after : before;
    boolean first = true;
    for (int i = 0; i < cols.size(); i++) {
      PgMessage.Relation.Column col = cols.get(i);
      if (col.key()) {
        String text = keySource.texts()[i];
        if (keySource.kinds()[i] == 'u' && before != null && before.kinds()[i] == 't') {
          text = before.texts()[i];
        }
        first = member(b, first, col, text);
      }
    }
    b.append("},\"after\":");
    List<String> unchanged = List.of();
    if (after == null) {
      b.append("null");
    } else {
      b.append('{');
      first = true;
      for (int i = 0; i < cols.size(); i++) {
        PgMessage.Relation.Column col = cols.get(i);
        if (after.kinds()[i] == 'u') {
          if (unchanged.isEmpty()) {
            unchanged = new ArrayList<>();
          }
          unchanged.add(col.name());
        } else {
          first = member(b, first, col, after.texts()[i]);
        }
      }
      b.append('}');
    }
    b.append(",\"before\":");
    if (before == null) {
      b.append("null");
    } else {
      boolean full = rel.replicaIdentity() == 'f';
      b.append('{');
      first = true;
      for (int i = 0; i < cols.size(); i++) {
        PgMessage.Relation.Column col = cols.get(i);
        if ((full || col.key()) && before.kinds()[i] != 'u') {
          first = member(b, first, col, before.texts()[i]);
        }
      }
      b.append('}');
    }
    if (!unchanged.isEmpty()) {
      b.append(",\"unchanged\":[");
      for (int k = 0; k < unchanged.size(); k++) {
        if (k > 0) {
          b.append(',');
        }
        Values.string(b, unchanged.get(k));
      }
      b.append(']');
    }
    b.append(",\"lsn\":\"").append(PgLsn.format(lsn)).append('"');
    if (xid != null) {
      b.append(",\"xid\":").append(xid.longValue());
    }
    b.append(",\"ts\":\"");
    timestamp(b, tsMicros);
    b.append("\",\"seq\":").append(seq).append('}');
    return new Event(op, b.toString(), unchanged.isEmpty() ? unchanged : List.copyOf(unchanged));
  }

  /** {@code "name":value}, after a comma unless it is the object's first member; returns false (no longer first). */
  private boolean member(StringBuilder b, boolean first, PgMessage.Relation.Column col, String text) {
    if (!first) {
      b.append(',');
    }
    Values.string(b, col.name());
    b.append(':');
    Values.write(b, types, col.typeOid(), text);
    return false;
  }

  /**
   * The partition of a row: by the row key ({@code partitionBy} null or empty), {@value PartitionKeys#SINGLE}
   * ({@code ["single"]}), or the listed columns' printed values in the listed order, through {@link
   * PartitionKeys}. {@code t} is the new tuple, or for a delete the old one; it must carry those columns: a
   * delete under default identity carries only the key, so {@code partitionBy} columns outside the key need
   * REPLICA IDENTITY FULL.
   *
   * @throws IllegalArgumentException for a column the relation does not have
   * @throws IllegalStateException when a partition column is an unchanged TOASTed value (not in the tuple)
   */
  String partition(PgMessage.Relation rel, PgMessage.Tuple t, List<String> partitionBy) {
    check(rel, t);
    List<PgMessage.Relation.Column> cols = rel.columns();
    List<String> values = new ArrayList<>();
    if (partitionBy == null || partitionBy.isEmpty()) {
      for (int i = 0; i < cols.size(); i++) {
        if (cols.get(i).key()) {
          values.add(printed(rel, t, i));
        }
      }
      if (values.isEmpty()) {
        throw new IllegalArgumentException("table " + rel.schema() + "." + rel.name() + " has no row key");
      }
    } else if (partitionBy.size() == 1 && partitionBy.get(0).equals("single")) {
      return PartitionKeys.SINGLE;
    } else {
      for (String name : partitionBy) {
        int i = indexOf(rel, name);
        if (i < 0) {
          throw new IllegalArgumentException(
              "partitionBy column '" + name + "' is not a column of " + rel.schema() + "." + rel.name());
        }
        values.add(printed(rel, t, i));
      }
    }
    return PartitionKeys.of(values);
  }

  private static String printed(PgMessage.Relation rel, PgMessage.Tuple t, int i) {
    if (t.kinds()[i] == 'u') {
      throw new IllegalStateException("partition column '" + rel.columns().get(i).name() + "' of " + rel.schema()
          + "." + rel.name() + " is an unchanged TOASTed value the change does not carry: read it back");
    }
    return t.texts()[i];
  }

  private static int indexOf(PgMessage.Relation rel, String name) {
    for (int i = 0; i < rel.columns().size(); i++) {
      if (rel.columns().get(i).name().equals(name)) {
        return i;
      }
    }
    return -1;
  }

  private static void check(PgMessage.Relation rel, PgMessage.Tuple t) {
    if (t != null && t.size() != rel.columns().size()) {
      throw new IllegalArgumentException("a tuple of " + t.size() + " values for " + rel.schema() + "." + rel.name()
          + " with " + rel.columns().size() + " columns: the relation is not the one the tuple was sent for");
    }
  }

  /** {@code 2026-10-03T06:15:03.583036Z}: UTC, always six fractional digits. */
  static String timestamp(long micros) {
    StringBuilder b = new StringBuilder(27);
    timestamp(b, micros);
    return b.toString();
  }

  private static void timestamp(StringBuilder b, long micros) {
    long seconds = Math.floorDiv(micros, 1_000_000L);
    int fraction = (int) Math.floorMod(micros, 1_000_000L);
    LocalDateTime t = LocalDateTime.ofEpochSecond(seconds, 0, ZoneOffset.UTC);
    if (t.getYear() < 0 || t.getYear() > 9999) {
      b.append(TS.format(Instant.ofEpochSecond(seconds, fraction * 1000L)));
      return;
    }
    pad(b, t.getYear(), 4).append('-');
    pad(b, t.getMonthValue(), 2).append('-');
    pad(b, t.getDayOfMonth(), 2).append('T');
    pad(b, t.getHour(), 2).append(':');
    pad(b, t.getMinute(), 2).append(':');
    pad(b, t.getSecond(), 2).append('.');
    pad(b, fraction, 6).append('Z');
  }

  private static StringBuilder pad(StringBuilder b, int value, int width) {
    String s = Integer.toString(value);
    for (int k = s.length(); k < width; k++) {
      b.append('0');
    }
    return b.append(s);
  }

  /**
   * A relation from pgoutput with the row key flagged: under REPLICA IDENTITY FULL pgoutput flags every
   * column, so the flags are replaced by the primary key read from the catalog; other relations are returned
   * as they are.
   *
   * @throws IllegalStateException when a FULL table has no primary key
   */
  static PgMessage.Relation withRowKey(Connection c, PgMessage.Relation rel) throws SQLException {
    if (rel.replicaIdentity() != 'f') {
      return rel;
    }
    List<PgMessage.Relation.Column> cols = keyFrom(c, rel.oid(), rel.columns(), "indisprimary");
    if (cols.stream().noneMatch(PgMessage.Relation.Column::key)) {
      throw new IllegalStateException("table " + rel.schema() + "." + rel.name()
          + " has REPLICA IDENTITY FULL and no primary key: events need a row key");
    }
    return new PgMessage.Relation(rel.oid(), rel.schema(), rel.name(), rel.replicaIdentity(), List.copyOf(cols));
  }

  private static List<PgMessage.Relation.Column> keyFrom(Connection c, int oid, List<PgMessage.Relation.Column> cols,
      String flag) throws SQLException {
    List<String> key = new ArrayList<>();
    String sql = "SELECT a.attname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a"
        + " ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) WHERE i.indrelid = ? AND i." + flag;
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setLong(1, Integer.toUnsignedLong(oid));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          key.add(rs.getString(1));
        }
      }
    }
    List<PgMessage.Relation.Column> out = new ArrayList<>(cols.size());
    for (PgMessage.Relation.Column col : cols) {
      out.add(new PgMessage.Relation.Column(key.contains(col.name()), col.name(), col.typeOid(), col.typmod()));
    }
    return out;
  }
}
