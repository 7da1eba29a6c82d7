package io.queen.embedded;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/**
 * A thread that terminates the backends of pushes ({@code pg_terminate_backend}) at random moments until closed: mostly
 * a push that is running (taking locks, inserting, or waiting for its commit to be flushed), and with {@code idleShare}
 * one idle in the pool, whose next push then finds its connection dead. The pause between shots is random on purpose
 * (the fault injection, not a wait for a condition). {@link #storedRows} reads what the pushes left.
 */
final class PushKiller implements AutoCloseable {
  private final AtomicBoolean done = new AtomicBoolean();
  private final AtomicInteger kills = new AtomicInteger();
  private final Thread thread;

  /**
   * @param idleShare the share of shots aimed at idle backends (0 for running pushes only)
   * @param minPauseMs the shortest pause between two shots
   * @param maxPauseMs the longest pause between two shots (exclusive)
   * @param maxKills stops shooting after this many terminated backends
   */
  PushKiller(DataSource ds, String name, double idleShare, int minPauseMs, int maxPauseMs, int maxKills) {
    thread = new Thread(() -> {
      String sql = "select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database()"
          + " and pid <> pg_backend_pid() and query like '%.push%' and state = ?";
      try (Connection k = ds.getConnection(); PreparedStatement st = k.prepareStatement(sql)) {
        while (!done.get() && kills.get() < maxKills) {
          st.setString(1, ThreadLocalRandom.current().nextDouble() < idleShare ? "idle" : "active");
          try (ResultSet rs = st.executeQuery()) {
            while (rs.next()) {
              if (rs.getBoolean(1)) {
                kills.incrementAndGet();
              }
            }
          }
          Thread.sleep(ThreadLocalRandom.current().nextInt(minPauseMs, maxPauseMs));
        }
      } catch (SQLException | InterruptedException e) {
        throw new IllegalStateException(e);
      }
    }, name);
    thread.start();
  }

  /** Backends terminated so far. */
  int kills() {
    return kills.get();
  }

  /** Stops shooting and waits (bounded) for the thread. */
  @Override
  public void close() throws InterruptedException {
    done.set(true);
    thread.join(10_000);
  }

  /**
   * Queue {@code q}'s stored messages: message id → {payload seq, offset}; read again on another connection when the
   * killer's last shot hit a pooled one.
   */
  static Map<UUID, long[]> storedRows(DataSource ds, String q) {
    for (int attempt = 1; ; attempt++) {
      Map<UUID, long[]> out = new HashMap<>();
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.id,"
          + " (m.payload->>'seq')::int, m.\"offset\" from queen.messages m join queen.partitions p on p.id = m.partition_id"
          + " join queen.queues qq on qq.id = p.queue_id where qq.name = ?")) {
        st.setString(1, q);
        try (ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            out.put(rs.getObject(1, UUID.class), new long[] {rs.getInt(2), rs.getLong(3)});
          }
        }
        return out;
      } catch (SQLException e) {
        if (attempt >= 5 || !"57P01".equals(e.getSQLState())) {
          throw new IllegalStateException(e);
        }
      }
    }
  }
}
