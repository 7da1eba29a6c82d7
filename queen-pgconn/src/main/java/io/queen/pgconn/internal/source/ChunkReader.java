package io.queen.pgconn.internal.source;

import io.queen.pgconn.internal.spec.Ident;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The snapshot's reads of the source database, on the chunk thread's normal connection, each in a short transaction
 * of its own: a table's shape and key from the catalog, its greatest key, one chunk of rows, and the watermarks.
 *
 * <p><b>One chunk.</b> On a thread of its own (never the stream's), the snapshot writes a low watermark (LW) into
 * the WAL with {@code pg_logical_emit_message(false, 'queen-snap', '{"s":..,"w":..,"m":"lw"}', true)} (non-
 * transactional, so it arrives at its WAL position), reads the chunk in a short REPEATABLE READ transaction of its
 * own on a normal connection of the source database ({@code WHERE (k1,k2) > (last) AND (k1,k2) <= (max) ORDER BY
 * k1,k2 LIMIT n}, every column as its type's output function prints it ({@code format('%s', col)}, as pgoutput
 * does; not {@code col::text}, which prints some types differently) under the walsender's session settings, plus
 * {@code pg_current_snapshot()} and the read time), buffers the rows and writes the high watermark (HW). The
 * snapshot opens the next window only after this HW came back through the stream.
 */
final class ChunkReader {
  /** Logs under ChunkedSnapshot's logger, the one an operator knows and configures for all of it. */
  private static final Logger LOG = LoggerFactory.getLogger(ChunkedSnapshot.class);

  /** On the chunk thread, before a chunk's rows are read (the events' {@link ChunkEvents#prepare}). */
  @FunctionalInterface
  interface Prepare {
    void prepare(Connection c, PgMessage.Relation shape) throws SQLException;
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

  private ChunkReader() {}

  static void emit(Connection c, String id, String kind) throws SQLException {
    int dash = id.lastIndexOf('-');
    String content = "{\"s\":\"" + id.substring(0, dash) + "\",\"w\":" + id.substring(dash + 1) + ",\"m\":\"" + kind
        + "\"}";
    try (PreparedStatement ps = c.prepareStatement("SELECT pg_logical_emit_message(false, ?, ?, true)")) {
      ps.setString(1, SnapshotHook.PREFIX);
      ps.setString(2, content);
      ps.executeQuery().close();
    }
  }

  /** The table's greatest key now (null: the table is empty), in its own short transaction. */
  static List<String> maxKey(Connection c, SnapshotTable t) throws SQLException {
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
  static Chunk read(Connection c, SnapshotTable t, List<String> from, List<String> to, int chunkRows,
      Prepare prepare) throws SQLException {
    c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
    c.setAutoCommit(false);
    try {
      Visibility vis;
      long readMicros;
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
      prepare.prepare(c, shape.relation());
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
  static Shape shape(Connection c, SnapshotTable t) throws SQLException {
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

  static List<String> key(Shape shape, PgMessage.Tuple row) {
    String[] k = new String[shape.keyIdx().length];
    for (int i = 0; i < k.length; i++) {
      k[i] = row.texts()[shape.keyIdx()[i]];
    }
    return Collections.unmodifiableList(Arrays.asList(k));
  }

  private static void rollbackQuietly(Connection c) {
    try {
      c.rollback();
    } catch (SQLException e) {
      LOG.debug("rollback of a snapshot transaction failed (SQLSTATE {})", e.getSQLState());
    }
  }
}
