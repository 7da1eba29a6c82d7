package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.ChildJvm;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;

/**
 * A source node in a JVM of its own, for the tests that crash an owner: SIGKILL ends it as a crash would, its lease
 * neither renewed nor given back, so another node takes the source over only once the lease runs out.
 *
 * <p>The child ({@link #main}): Queen with queen-pgconn on the class path, re-reading the connector documents every
 * 200 ms, with the given node id and source lease TTL; its pool's connections carry {@code application_name}
 * {@code queen-node-<nodeId>}. It prints {@code READY <nodeId>} once started, then every 50 ms one line per connector:
 * {@code STATUS <connector> <phase> <leaseNode> <messages> <snapshotRows> <pointerLsn>} ({@code -} for a null). Runs
 * until killed. Arguments: {@code jdbcUrl user password nodeId leaseTtlMillis}.
 *
 * <p>The test's side: {@link #start}, {@link #awaitStatus} and {@link #crash}.
 */
public final class SourceNodeChild {
  private SourceNodeChild() {}

  public static void main(String[] args) throws Exception {
    String url = args[0] + (args[0].contains("?") ? "&" : "?") + "ApplicationName=" + applicationName(args[3]);
    Queen queen = EmbeddedQueen.builder().jdbcUrl(url, args[1], args[2]).nodeId(args[3])
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))
            .sourceLeaseTtl(Duration.ofMillis(Long.parseLong(args[4]))))
        .start();
    System.out.println("READY " + queen.nodeId());
    java.util.concurrent.Executors.newSingleThreadScheduledExecutor().scheduleWithFixedDelay(() -> {
      try {
        for (ConnectorStatus s : queen.connectors().status()) {
          System.out.println("STATUS " + s.name() + " " + s.phase() + " " + orDash(s.leaseNode()) + " "
              + s.counters().getOrDefault("messages", 0L) + " " + s.counters().getOrDefault("snapshotRows", 0L) + " "
              + orDash(s.pointerLsn()));
        }
      } catch (RuntimeException e) {
        System.err.println("status: " + e); // the next round tries again
      }
    }, 0, 50, java.util.concurrent.TimeUnit.MILLISECONDS); // a non-daemon thread: the child runs until killed
  }

  private static String orDash(Object o) {
    return o == null ? "-" : o.toString();
  }

  static String applicationName(String nodeId) {
    return "queen-node-" + nodeId;
  }

  /** Starts node {@code nodeId} in a child JVM on {@code db} and waits until it runs (the caller closes it). */
  static ChildJvm start(TestDatabase db, String nodeId, Duration leaseTtl) {
    ChildJvm c = ChildJvm.builder(SourceNodeChild.class).jvmOptions("-Xmx256m", "-XX:TieredStopAtLevel=1")
        .args(db.jdbcUrl(), db.user(), db.password(), nodeId, Long.toString(leaseTtl.toMillis())).start();
    try {
      c.awaitLine(l -> l.equals("READY " + nodeId), Duration.ofSeconds(60));
    } catch (AssertionError e) {
      c.close();
      throw e;
    }
    return c;
  }

  /**
   * Waits for a status line of {@code connector} whose fields after the name begin with {@code fields} (phase, then
   * lease node, messages, snapshot rows, pointer LSN) and returns those fields.
   */
  static String[] awaitStatus(ChildJvm c, String connector, String fields, Duration within) {
    String line = c.awaitLine(l -> l.startsWith("STATUS " + connector + " " + fields), within);
    return line.substring(("STATUS " + connector + " ").length()).split(" ");
  }

  /**
   * Kills the node (SIGKILL) and returns once every connection its Queen pool had is gone from the server: nothing it
   * began can commit after that.
   */
  static void crash(TestDatabase db, ChildJvm c, String nodeId) throws Exception {
    assertThat(connections(db, nodeId)).as("the node's connections, found by their application_name").isPositive();
    c.kill();
    assertThat(c.awaitExit(Duration.ofSeconds(30))).as("killed").isEqualTo(137);
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(10))
        .until(() -> connections(db, nodeId) == 0);
  }

  private static long connections(TestDatabase db, String nodeId) throws Exception {
    try (Connection conn = db.connection(); PreparedStatement st = conn.prepareStatement(
        "select count(*) from pg_stat_activity where application_name = ?")) {
      st.setString(1, applicationName(nodeId));
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }
}
