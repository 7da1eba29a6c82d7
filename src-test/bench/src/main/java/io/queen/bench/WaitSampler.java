package io.queen.bench;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * With {@code --diagnose}: samples {@code pg_stat_activity} every 5 ms while a phase runs and prints where the active backends
 * spent their time (CPU, WAL flushes, lock waits) per statement. Costs one core a little; off by default.
 */
final class WaitSampler implements AutoCloseable {
  private static final String QUERY = "SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') || '  '"
      + " || left(regexp_replace(query, '\\s+', ' ', 'g'), 48) FROM pg_stat_activity"
      + " WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'";

  private final Map<String, Integer> counts = new ConcurrentHashMap<>();
  private final AtomicBoolean stop = new AtomicBoolean();
  private final Thread thread;
  private final String name;

  private WaitSampler(String name, Connection connection) {
    this.name = name;
    this.thread = ThroughputRunner.named("bench-sampler").newThread(() -> sample(connection));
    thread.start();
  }

  /** A running sampler, or {@code null} when not enabled. */
  static WaitSampler start(boolean enabled, String name, Connection connection) {
    return enabled ? new WaitSampler(name, connection) : null;
  }

  private void sample(Connection connection) {
    try (connection; Statement s = connection.createStatement()) {
      while (!stop.get()) {
        try (ResultSet rs = s.executeQuery(QUERY)) {
          while (rs.next()) {
            counts.merge(rs.getString(1), 1, Integer::sum);
          }
        }
        Thread.sleep(5);
      }
    } catch (SQLException e) {
      System.out.println("  (wait sampler stopped: " + e.getMessage() + ")");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    stop.set(true);
    try {
      thread.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    int total = counts.values().stream().mapToInt(Integer::intValue).sum();
    List<Map.Entry<String, Integer>> top = new ArrayList<>(counts.entrySet());
    top.sort((a, b) -> b.getValue() - a.getValue());
    System.out.println("  wait events of " + name + " (" + total + " samples of active backends):");
    for (Map.Entry<String, Integer> e : top.subList(0, Math.min(8, top.size()))) {
      System.out.println(String.format(Locale.ROOT, "    %5.1f%%  %s", 100.0 * e.getValue() / Math.max(1, total), e.getKey()));
    }
  }
}
