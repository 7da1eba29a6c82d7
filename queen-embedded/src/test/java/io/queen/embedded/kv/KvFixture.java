package io.queen.embedded.kv;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.Kv;
import io.queen.embedded.internal.db.Migrator;
import io.queen.embedded.internal.kv.KvImpl;
import io.queen.embedded.internal.kv.KvStore;
import io.queen.embedded.internal.log.JsonCodec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import javax.sql.DataSource;

/** The KV store on a migrated schema, without a running node, plus SQL helpers for the tests. */
final class KvFixture {
  static final String SCHEMA = "queen";

  final DataSource ds;
  final KvStore store;
  final Kv kv;

  KvFixture(DataSource ds) {
    this(ds, 4L * 1024 * 1024);
  }

  KvFixture(DataSource ds, long maxReadBytes) {
    this.ds = ds;
    Migrator.migrate(ds, SCHEMA);
    this.store = new KvStore(SCHEMA, new JsonCodec(new ObjectMapper()), maxReadBytes);
    this.kv = new KvImpl(ds, store);
  }

  /** Moves a key's expiry into the past (database clock) without removing the row. */
  void expire(String ns, String key) {
    update("update queen.kv set expires_at = now() - interval '1 second' where namespace = ? and key = ?", ns, key);
  }

  /** Rows physically present for a key, live or not. */
  int physicalRows(String ns, String key) {
    return (int) queryLong("select count(*) from queen.kv where namespace = ? and key = ?", ns, key);
  }

  long queryLong(String sql, Object... args) {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(sql)) {
      for (int i = 0; i < args.length; i++) {
        st.setObject(i + 1, args[i]);
      }
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  int update(String sql, Object... args) {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(sql)) {
      for (int i = 0; i < args.length; i++) {
        st.setObject(i + 1, args[i]);
      }
      return st.executeUpdate();
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Runs a statement and returns its SQLState (null when it succeeded). */
  String sqlState(String sql, Object... args) {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(sql)) {
      for (int i = 0; i < args.length; i++) {
        st.setObject(i + 1, args[i]);
      }
      st.execute();
      return null;
    } catch (SQLException e) {
      return e.getSQLState();
    }
  }
}
