package io.queen.e2e;

import static org.awaitility.Awaitility.await;

import io.queen.Message;
import io.queen.Queen;
import io.queen.Status;
import io.queen.embedded.internal.QueenImpl;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.awaitility.core.ConditionFactory;

/** Helpers shared by the end-to-end suites. Stateless. */
final class E2e {
  private E2e() {}

  /** Awaitility with a short poll interval and the given bound. */
  static ConditionFactory within(Duration atMost) {
    return await().atMost(atMost).pollDelay(Duration.ZERO).pollInterval(Duration.ofMillis(25));
  }

  /** The group's entry in a fresh status snapshot, or {@code null} when the group does not exist yet. */
  static Status.GroupStatus group(Queen queen, String queue, String group) {
    Status.QueueStatus q = queen.status().queue(queue);
    if (q == null) {
      return null;
    }
    return q.groups().stream().filter(g -> g.name().equals(group)).findFirst().orElse(null);
  }

  /** The group's lag (messages after its cursors), or -1 when the group does not exist yet. */
  static long lag(Queen queen, String queue, String group) {
    Status.GroupStatus g = group(queen, queue, group);
    return g == null ? -1 : g.lag();
  }

  /** Live leases the group holds. */
  static long leases(Queen queen, String queue, String group) {
    Status.GroupStatus g = group(queen, queue, group);
    return g == null ? 0 : g.leases();
  }

  /** The broker internals of a node (whether its wake-up listener is connected). */
  static QueenImpl internals(Queen queen) {
    return (QueenImpl) queen;
  }

  /** The JDBC URL of {@code db} with {@code ApplicationName} set, so a test can find (and kill) that node's backends. */
  static String urlWithApplicationName(TestDatabase db, String applicationName) {
    String url = db.jdbcUrl();
    return url + (url.contains("?") ? "&" : "?") + "ApplicationName=" + applicationName;
  }

  /** Terminates every backend of this database whose application_name is {@code applicationName}; returns how many. */
  static int terminateBackends(TestDatabase db, String applicationName) throws SQLException {
    try (Connection c = db.connection();
        PreparedStatement st = c.prepareStatement("select count(pg_terminate_backend(pid)) from pg_stat_activity"
            + " where datname = current_database() and application_name = ? and pid <> pg_backend_pid()")) {
      st.setString(1, applicationName);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    }
  }

  /** The {@code application_name} of the wake-up listener's connection of {@code node}. */
  static String listenerName(Queen node) {
    return "queen-" + node.nodeId() + "-listener";
  }

  /** The backend pids of the wake-up listener of {@code node} (found by {@link #listenerName}). */
  static List<Integer> listenerPids(TestDatabase db, Queen node) throws SQLException {
    try (Connection c = db.connection();
        PreparedStatement st = c.prepareStatement("select pid from pg_stat_activity"
            + " where datname = current_database() and application_name = ? order by pid")) {
      st.setString(1, listenerName(node));
      List<Integer> pids = new ArrayList<>();
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          pids.add(rs.getInt(1));
        }
      }
      return pids;
    }
  }

  /**
   * Whether a heartbeat of {@code node} ran after {@code other} registered (both in the schema {@code queen}): each beat
   * tells the node whether another node is alive, so from then on it notifies {@code other} of its pushes.
   */
  static boolean beatSinceStartOf(TestDatabase db, Queen node, Queen other) throws SQLException {
    try (Connection c = db.connection();
        PreparedStatement st = c.prepareStatement("select n.heartbeat_at > o.started_at from queen.nodes n, queen.nodes o"
            + " where n.node_id = ? and o.node_id = ?")) {
      st.setString(1, node.nodeId());
      st.setString(2, other.nodeId());
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() && rs.getBoolean(1);
      }
    }
  }

  /** Terminates one backend by pid; returns whether it was signalled. */
  static boolean terminateBackend(TestDatabase db, int pid) throws SQLException {
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement("select pg_terminate_backend(?)")) {
      st.setInt(1, pid);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }

  /**
   * Counts deliveries per message id and checks per-partition order: every partition must be seen at
   * offsets 0, 1, 2, ... with no offset going backwards, repeated or skipped. Thread-safe.
   */
  static final class Recorder {
    final Map<UUID, AtomicInteger> seen = new ConcurrentHashMap<>();
    final Map<Long, Long> lastOffset = new ConcurrentHashMap<>();
    final List<String> violations = Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger total = new AtomicInteger();

    void record(Message m) {
      seen.computeIfAbsent(m.id(), k -> new AtomicInteger()).incrementAndGet();
      lastOffset.compute(m.partitionId(), (p, last) -> {
        long prev = last == null ? -1 : last;
        if (m.offset() <= prev) {
          violations.add("partition " + m.partition() + ": offset " + m.offset() + " after " + prev + " (out of order or repeated)");
        } else if (m.offset() != prev + 1) {
          violations.add("partition " + m.partition() + ": offset " + m.offset() + " after " + prev + " (skipped "
              + (m.offset() - prev - 1) + ")");
        }
        return Math.max(prev, m.offset());
      });
      total.incrementAndGet();
    }

    /** Ids seen more than once, with their counts. */
    Map<UUID, Integer> duplicates() {
      Map<UUID, Integer> d = new HashMap<>();
      seen.forEach((id, n) -> {
        if (n.get() != 1) {
          d.put(id, n.get());
        }
      });
      return d;
    }
  }

  /**
   * Nodes and other things a test opens, closed in reverse order by {@link #close()} (call it from
   * {@code @AfterEach}). Each node gets its own pool, as if it were another JVM.
   */
  static final class Nodes implements AutoCloseable {
    private final java.util.Deque<AutoCloseable> open = new java.util.ArrayDeque<>();
    private final TestDatabase db;
    private final int poolSize;

    Nodes(TestDatabase db, int poolSize) {
      this.db = db;
      this.poolSize = poolSize;
    }

    Queen node(String id) {
      return node(id, b -> b);
    }

    Queen node(String id, java.util.function.UnaryOperator<io.queen.embedded.EmbeddedQueen.Builder> options) {
      var pool = closeLater(db.newDataSource(poolSize));
      return closeLater(options.apply(io.queen.embedded.EmbeddedQueen.builder().dataSource(pool).nodeId(id)).start());
    }

    <T extends AutoCloseable> T closeLater(T t) {
      open.push(t);
      return t;
    }

    @Override
    public void close() throws Exception {
      while (!open.isEmpty()) {
        open.pop().close();
      }
    }
  }
}
