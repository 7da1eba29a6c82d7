package io.queen.pgconn.internal.source;

import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A publication and a logical slot made with plain SQL, read with {@code pg_logical_slot_get_binary_changes}
 * (pgoutput, protocol 1, messages on): real pgoutput bytes without any streaming code. Dropped by {@link #close()}.
 */
final class DecodingSlot implements AutoCloseable {
  /** One row of {@code pg_logical_slot_get_binary_changes}: its lsn and xid columns and the decoded data. */
  record Row(long lsn, long xid, PgMessage message) {}

  final Connection c;
  final String slot;
  final String publication;

  /** Publishes {@code tables} (already created, names as SQL) and creates the slot after the publication. */
  DecodingSlot(Connection c, String... tables) throws SQLException {
    this.c = c;
    String suffix = Long.toString(ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE, 36);
    this.slot = "dec_" + suffix;
    this.publication = "pub_" + suffix;
    try (Statement st = c.createStatement()) {
      st.execute("CREATE PUBLICATION " + publication + " FOR TABLE " + String.join(", ", tables));
      st.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
    }
  }

  /** Every message since the last read, decoded, in the slot's order; consumes them. */
  List<Row> read() throws SQLException {
    List<Row> out = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement("SELECT lsn - '0/0', xid::text::bigint, data FROM"
        + " pg_logical_slot_get_binary_changes(?, NULL, NULL, 'proto_version', '1', 'publication_names', ?,"
        + " 'messages', 'true')")) {
      ps.setString(1, slot);
      ps.setString(2, publication);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          long lsn = rs.getBigDecimal(1).longValue();
          long xid = rs.getLong(2);
          byte[] data = rs.getBytes(3);
          // wrap at an offset inside a larger array, as pgjdbc's stream hands it out
          byte[] shared = new byte[data.length + 11];
          shared[0] = 'X';
          System.arraycopy(data, 0, shared, 7, data.length);
          ByteBuffer buf = ByteBuffer.wrap(shared, 7, data.length).slice();
          out.add(new Row(lsn, xid, PgOutputDecoder.decode(buf)));
        }
      }
    }
    return out;
  }

  /** Only the messages, without the lsn and xid columns. */
  List<PgMessage> messages() throws SQLException {
    return read().stream().map(Row::message).toList();
  }

  /** The messages of class {@code type} among {@code rows}, in order. */
  static <T extends PgMessage> List<T> of(List<PgMessage> rows, Class<T> type) {
    return rows.stream().filter(type::isInstance).map(type::cast).toList();
  }

  static long lsn(Connection c, String expr) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT (" + expr + ") - '0/0'")) {
      rs.next();
      return rs.getBigDecimal(1).longValue();
    }
  }

  @Override
  public void close() throws SQLException {
    try (Statement st = c.createStatement()) {
      st.execute("SELECT pg_drop_replication_slot('" + slot + "')");
      st.execute("DROP PUBLICATION IF EXISTS " + publication);
    }
  }
}
