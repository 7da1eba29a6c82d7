package io.queen.e2e;

import static org.awaitility.Awaitility.await;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A PostgreSQL 17 primary with a physical standby streaming from it, both from the zonky binaries (which have no
 * {@code pg_basebackup}): the standby is a cold copy of the primary's data directory, taken after a clean stop. The
 * standby is set up as PostgreSQL 17's failover documentation asks: a physical slot on the primary that
 * {@code synchronized_standby_slots} names, {@code hot_standby_feedback} and {@code sync_replication_slots} on the
 * standby. {@link #killPrimary()} ends the primary as a crash would ({@code kill -9} of the postmaster) and
 * {@link #promote()} makes the standby the primary. Each instance has its own directory and ports.
 */
final class StandbyPair implements AutoCloseable {
  static final String STANDBY_SLOT = "standby1";

  private final Path dir;
  private final int primaryPort;
  private final int standbyPort;
  private EmbeddedPostgres primary;
  private EmbeddedPostgres standby;

  private StandbyPair(Path dir, int primaryPort, int standbyPort) {
    this.dir = dir;
    this.primaryPort = primaryPort;
    this.standbyPort = standbyPort;
  }

  /** Starts both servers; returns once the standby streams from the primary. */
  static StandbyPair start() throws Exception {
    return start(true);
  }

  /** Starts the primary, and the standby too or later ({@link #startStandby()}). */
  static StandbyPair start(boolean standbyNow) throws Exception {
    Path dir = Files.createTempDirectory("queen-standby");
    StandbyPair pair = new StandbyPair(dir, OwnServer.freePort(), OwnServer.freePort());
    try {
      pair.boot();
      if (standbyNow) {
        pair.startStandby();
      }
      return pair;
    } catch (Exception | Error e) {
      pair.close();
      throw e;
    }
  }

  /** Starts the standby from the copy taken at boot; returns once it streams from the primary. */
  void startStandby() throws Exception {
    standby = server(dir.resolve("standby"), standbyPort).start();
    await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100)).until(() -> !query(primaryPort,
        "select count(*) from pg_stat_replication where state = 'streaming'").get(0).equals("0"));
  }

  private void boot() throws Exception {
    Path p = dir.resolve("primary");
    Path s = dir.resolve("standby");
    try (EmbeddedPostgres first = server(p, primaryPort).start()) {
      try (Connection c = connect(primaryPort); Statement st = c.createStatement()) {
        st.execute("select pg_create_physical_replication_slot('" + STANDBY_SLOT + "')");
      }
    }
    run("cp", "-a", p.toString(), s.toString());
    Files.deleteIfExists(s.resolve("postmaster.pid"));
    run("sh", "-c", "rm -rf '" + s.resolve("pg_replslot") + "'/*"); // as pg_basebackup leaves it: no slots copied
    Files.createFile(s.resolve("standby.signal"));
    // in the copy's own configuration file: zonky hands server settings to pg_ctl as one option string, which a
    // value with spaces (the connection string) would break
    Files.writeString(s.resolve("postgresql.auto.conf"), "primary_conninfo = 'host=localhost port=" + primaryPort
        + " user=postgres dbname=postgres application_name=" + STANDBY_SLOT + "'\n"
        + "primary_slot_name = '" + STANDBY_SLOT + "'\nhot_standby_feedback = on\nsync_replication_slots = on\n",
        java.nio.file.StandardOpenOption.APPEND);
    // on the primary only (a command-line setting, not in the copy): a promoted standby must not name itself
    primary = server(p, primaryPort).setServerConfig("synchronized_standby_slots", STANDBY_SLOT).start();
  }

  private static EmbeddedPostgres.Builder server(Path dataDir, int port) {
    return EmbeddedPostgres.builder().setDataDirectory(dataDir.toFile()).setCleanDataDirectory(false).setPort(port)
        .setServerConfig("wal_level", "logical").setServerConfig("max_wal_senders", "10")
        .setServerConfig("max_replication_slots", "10").setServerConfig("fsync", "on")
        .setServerConfig("synchronous_commit", "on").setServerConfig("wal_receiver_status_interval", "1s")
        .setPGStartupWait(Duration.ofSeconds(60)).setRegisterShutdownHook(false);
  }

  int primaryPort() {
    return primaryPort;
  }

  int standbyPort() {
    return standbyPort;
  }

  /** A JDBC URL naming both servers that connects to whichever of them is the primary. */
  String url() {
    return "jdbc:postgresql://localhost:" + primaryPort + ",localhost:" + standbyPort
        + "/postgres?targetServerType=primary";
  }

  static Connection connect(int port) throws SQLException {
    return DriverManager.getConnection("jdbc:postgresql://localhost:" + port + "/postgres", "postgres", "postgres");
  }

  /** The first column of every row {@code sql} returns on the server at {@code port}, as text. */
  static List<String> query(int port, String sql) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = connect(port); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  /** Ends the primary as a crash would: its postmaster killed with SIGKILL (the backends notice and exit). */
  void killPrimary() throws Exception {
    String pid = Files.readAllLines(dir.resolve("primary").resolve("postmaster.pid")).get(0).trim();
    run("kill", "-9", pid);
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50)).until(() -> !answers(primaryPort));
  }

  /** Promotes the standby and waits until it accepts writes. */
  void promote() throws SQLException {
    // a standby restarting its processes (a killed walreceiver) refuses connections for a moment
    await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100)).until(() -> answers(standbyPort));
    try (Connection c = connect(standbyPort); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select pg_promote(true, 60)")) {
      rs.next();
      if (!rs.getBoolean(1)) {
        throw new IllegalStateException("the standby was not promoted within 60 s");
      }
    }
  }

  /** Whether the server at {@code port} accepts a connection now. */
  private static boolean answers(int port) {
    try (Connection c = connect(port)) {
      return true;
    } catch (SQLException e) {
      return false;
    }
  }

  /** Sends {@code kill -<signal>} to a server process (a backend, the walreceiver) by its pid. */
  static void signal(String signal, String pid) {
    run("kill", "-" + signal, pid);
  }

  @Override
  public void close() {
    for (EmbeddedPostgres pg : new EmbeddedPostgres[] {standby, primary}) {
      if (pg != null) {
        try {
          pg.close();
        } catch (IOException | RuntimeException e) {
          // a killed primary cannot be stopped: nothing is left to stop
        }
      }
    }
    run("rm", "-rf", dir.toString());
  }

  private static void run(String... command) {
    try {
      Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes());
      if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
