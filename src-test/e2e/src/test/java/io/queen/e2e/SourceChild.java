package io.queen.e2e;

import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import java.time.Duration;

/**
 * A source node in its own JVM, for {@link SourceCrashIT}: Queen with queen-pgconn on the class path, re-reading
 * the connector documents every 200 ms, a 2 s source lease and session timeout (so a killed owner's source is
 * taken over soon). The test process puts the documents and writes the table; this node only runs the
 * connectors. Prints {@code READY <nodeId>} once started, then every 100 ms one
 * {@code STATUS <connector> <phase> <errorCode>} line per connector. Runs until killed.
 *
 * <p>Arguments: {@code jdbcUrl user password}.
 */
public final class SourceChild {
  private SourceChild() {}

  public static void main(String[] args) throws Exception {
    Queen queen = EmbeddedQueen.builder().jdbcUrl(args[0], args[1], args[2]).poolSize(6)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)).sourceLeaseTtl(Duration.ofSeconds(2)))
        .sessionTimeout(Duration.ofSeconds(2)).start();
    System.out.println("READY " + queen.nodeId());
    while (true) {
      for (ConnectorStatus s : queen.connectors().status()) {
        System.out.println("STATUS " + s.name() + " " + s.phase() + " " + s.errorCode());
      }
      Thread.sleep(100);
    }
  }
}
