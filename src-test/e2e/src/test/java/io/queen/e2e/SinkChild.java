package io.queen.e2e;

import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import java.time.Duration;

/**
 * A sink node in its own JVM, for {@link SinkCrashIT}: Queen with queen-pgconn on the class path,
 * connectors running, re-reading the connector documents every 200 ms, a 2 s session timeout (so
 * the leases of a killed child are free soon), and the test's encryption key. The test process puts the
 * documents and pushes; this node only runs the sinks. Prints {@code READY <nodeId>} once started, then
 * every 100 ms one {@code STATUS <connector> <phase> applied=<n> skipped=<n> dlq=<n> batches=<n> errors=<n>}
 * line per connector. Runs until killed.
 *
 * <p>Arguments: {@code jdbcUrl user password}.
 */
public final class SinkChild {
  private SinkChild() {}

  public static void main(String[] args) throws Exception {
    Queen queen = EmbeddedQueen.builder().jdbcUrl(args[0], args[1], args[2]).poolSize(10)
        .encryptionKey(SinkFixtures.KEY).connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .sessionTimeout(Duration.ofSeconds(2)).start();
    System.out.println("READY " + queen.nodeId());
    while (true) {
      for (ConnectorStatus s : queen.connectors().status()) {
        System.out.println("STATUS " + s.name() + " " + s.phase() + " applied=" + s.counters().get("applied")
            + " skipped=" + s.counters().get("skipped") + " dlq=" + s.counters().get("dlq") + " batches="
            + s.counters().get("batches") + " errors=" + s.counters().get("errors"));
      }
      Thread.sleep(100);
    }
  }
}
