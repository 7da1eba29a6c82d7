package io.queen.embedded;

import static org.awaitility.Awaitility.await;

import io.queen.Message;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import javax.sql.DataSource;

/** Row locks in tests that stage a race: take a cursor row, and wait until a statement waits for a lock. */
final class LockWaiters {
  private LockWaiters() {}

  /** Backends of this database (other than {@code admin}'s) waiting for a lock in a statement like {@code queryLike}. */
  static int count(Connection admin, String queryLike) throws SQLException {
    try (PreparedStatement st = admin.prepareStatement("select count(*) from pg_stat_activity where datname ="
        + " current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock' and query like ?")) {
      st.setString(1, queryLike);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    }
  }

  /** Waits (up to 20 s) until {@code n} statements like {@code queryLike} wait for a lock, or until {@code orDone}. */
  static void awaitWaiting(DataSource ds, String queryLike, int n, BooleanSupplier orDone) throws SQLException {
    try (Connection admin = ds.getConnection()) {
      await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(10))
          .until(() -> orDone.getAsBoolean() || count(admin, queryLike) >= n);
    }
  }

  /** Takes the cursor row of {@code m}'s partition and group, {@code FOR UPDATE}, in {@code c}'s transaction. */
  static void lockCursor(Connection c, String schema, Message m) throws SQLException {
    try (PreparedStatement st = c.prepareStatement(
        "select 1 from " + schema + ".cursors where partition_id = ? and group_name = ? for update")) {
      st.setLong(1, m.partitionId());
      st.setString(2, m.consumerGroup());
      st.executeQuery().close();
    }
  }
}
