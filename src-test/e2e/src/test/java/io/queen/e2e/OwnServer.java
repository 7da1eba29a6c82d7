package io.queen.e2e;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A PostgreSQL of a test's own, for tests that stop and start it (the shared test server cannot be restarted under the
 * other suites): the data directory is kept across starts, and the port is chosen once.
 */
final class OwnServer {
  private OwnServer() {}

  /** Starts (or starts again) the server of {@code dir} on {@code port}. */
  static EmbeddedPostgres start(Path dir, int port) throws IOException {
    return EmbeddedPostgres.builder().setDataDirectory(dir).setCleanDataDirectory(false).setPort(port)
        .setServerConfig("fsync", "on").setPGStartupWait(Duration.ofSeconds(60)).setRegisterShutdownHook(false)
        .start();
  }

  /** A port free at this moment. */
  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
