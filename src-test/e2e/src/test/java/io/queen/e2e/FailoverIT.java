package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A failover to a physical standby under a streaming source: the slot is created as a failover slot because a standby
 * streams, PostgreSQL 17 synchronises it to the standby, the primary is killed mid-stream and the standby promoted;
 * the source, pointed at both servers by one URL, goes on from the synchronised slot on the new primary. At the end
 * the queue holds exactly one message per change the new primary's table holds (changes that had not reached the
 * standby are gone with the old primary, from the table and the queue alike).
 */
class FailoverIT {
  private static final String DOC = "{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.items\","
      + " \"queue\": \"items\"}], \"snapshot\": \"initial\"}}";

  @Test
  @Timeout(value = 300, unit = TimeUnit.SECONDS)
  void aSourceGoesOnFromItsFailoverSlotAfterThePrimaryIsKilledAndTheStandbyPromoted() throws Exception {
    try (StandbyPair pair = StandbyPair.start()) {
      sql(pair.primaryPort(), "create table items (id bigint primary key, v int not null)",
          "insert into items select g, 0 from generate_series(1, 100) g");
      try (Queen queen = node(pair)) {
        queen.connectors().put("items-src", DOC);
        awaitPhase(queen, "streaming", 60);
        assertThat(StandbyPair.query(pair.primaryPort(),
            "select failover from pg_replication_slots where slot_name = 'queen_items_src'")).containsExactly("t");
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() -> StandbyPair.query(
            pair.standbyPort(), "select synced and not temporary from pg_replication_slots"
                + " where slot_name = 'queen_items_src'").equals(List.of("t")));

        AtomicBoolean writing = new AtomicBoolean(true);
        AtomicLong next = new AtomicLong(101);
        Thread writer = new Thread(() -> write(pair, writing, next), "writer");
        writer.start();
        await().atMost(Duration.ofSeconds(30)).until(() -> next.get() > 2_000);
        pair.killPrimary();
        pair.promote();
        await().atMost(Duration.ofSeconds(30)).until(() -> next.get() > 4_000);
        writing.set(false);
        writer.join();

        long rows = Long.parseLong(StandbyPair.query(pair.standbyPort(), "select count(*) from items").get(0));
        Map<Long, Integer> seen = new HashMap<>();
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200)).until(() -> {
          ConnectorStatus s = queen.connectors().status("items-src").orElseThrow();
          assertThat(s.errorCode()).as("source error: %s", s.error()).isNull();
          for (Message m : read(queen)) {
            seen.merge(Long.parseLong(m.partition()), 1, Integer::sum);
          }
          return seen.size() >= rows;
        });
        assertThat(seen.size()).isEqualTo(rows);
        assertThat(seen.values()).allMatch(n -> n == 1);
      }
    }
  }

  /**
   * The window between a change and the commit that records it in Queen: the standby has received the change (the
   * primary sends a failover slot's changes only once the standbys of {@code synchronized_standby_slots} have them)
   * but not Queen's commit of it, and PostgreSQL synchronises the slot's position to the standby in that window. The
   * source must not confirm the change before the standby has Queen's commit, or after the failover the slot would be
   * past a change the queue on the new primary does not hold.
   */
  @Test
  @Timeout(value = 300, unit = TimeUnit.SECONDS)
  void aChangeWhoseCommitInQueenHadNotReachedTheStandbyIsStreamedAgainAfterTheFailover() throws Exception {
    try (StandbyPair pair = StandbyPair.start()) {
      sql(pair.primaryPort(), "create table items (id bigint primary key, v int not null)",
          "insert into items select g, 0 from generate_series(1, 10) g");
      try (Queen queen = node(pair)) {
        queen.connectors().put("items-src", DOC);
        awaitPhase(queen, "streaming", 60);
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() -> StandbyPair.query(
            pair.standbyPort(), "select synced and not temporary from pg_replication_slots"
                + " where slot_name = 'queen_items_src'").equals(List.of("t")));
        await().atMost(Duration.ofSeconds(30)).until(() -> lag(pair) == 0);

        String receiver = StandbyPair.query(pair.standbyPort(), "select pid from pg_stat_wal_receiver").get(0);
        String lsn;
        try (Connection lock = StandbyPair.connect(pair.primaryPort()); Statement st = lock.createStatement()) {
          lock.setAutoCommit(false);
          st.execute("lock table queen.partitions in share mode"); // Queen's push of the new row waits here
          sql(pair.primaryPort(), "insert into items values (11, 1)");
          lsn = StandbyPair.query(pair.primaryPort(), "select pg_current_wal_lsn()").get(0);
          await().atMost(Duration.ofSeconds(30)).until(() -> StandbyPair.query(pair.standbyPort(),
              "select pg_last_wal_receive_lsn() >= '" + lsn + "'::pg_lsn").equals(List.of("t")));
          StandbyPair.signal("STOP", receiver); // the standby receives nothing more: not Queen's commit of row 11
          lock.commit();
        }
        // the source has committed row 11 in Queen; give it the time to confirm and PostgreSQL the time to sync
        await().atMost(Duration.ofSeconds(30)).until(() -> StandbyPair.query(pair.primaryPort(), "select count(*)"
            + " from queen.messages m join queen.partitions p on p.id = m.partition_id where p.name = '11'")
            .equals(List.of("1")));
        Thread.sleep(3_000); // what must not happen needs a window: a status interval, and slot synchronisation cycles
        pair.killPrimary();
        // what the primary sent after the pause waits unread in the receiver's socket: it goes with the receiver
        StandbyPair.signal("KILL", receiver);
        pair.promote();

        Map<String, Integer> seen = new HashMap<>();
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).untilAsserted(() -> {
          ConnectorStatus s = queen.connectors().status("items-src").orElseThrow();
          assertThat(s.errorCode()).as("source error: %s", s.error()).isNull();
          for (Message m : read(queen)) {
            seen.merge(m.partition(), 1, Integer::sum);
          }
          assertThat(seen).containsEntry("11", 1);
        });
        sql(pair.standbyPort(), "insert into items values (12, 1)");
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
          for (Message m : read(queen)) {
            seen.merge(m.partition(), 1, Integer::sum);
          }
          assertThat(seen).containsEntry("12", 1);
        });
        assertThat(seen.values()).allMatch(n -> n == 1);
      }
    }
  }

  /**
   * A slot created before the server had a standby becomes a failover slot at the source's next start (no resync);
   * after the failover, a promoted server whose synchronized_standby_slots still names a standby slot no standby
   * streams from (as a copied configuration would) holds back every failover slot's changes: the source says so at
   * its start, and goes on once the setting is cleared.
   */
  @Test
  @Timeout(value = 300, unit = TimeUnit.SECONDS)
  void aSlotMadeBeforeTheStandbyBecomesAFailoverSlotAndAPromotedServerNamingAMissingStandbyIsReported()
      throws Exception {
    try (StandbyPair pair = StandbyPair.start(false);
        io.queen.testkit.LogCapture logs = io.queen.testkit.LogCapture.start()) {
      sql(pair.primaryPort(), "create table items (id bigint primary key, v int not null)",
          "insert into items values (1, 0)");
      try (Queen queen = node(pair)) {
        queen.connectors().put("items-src", DOC);
        awaitPhase(queen, "streaming", 60);
        assertThat(StandbyPair.query(pair.primaryPort(),
            "select failover from pg_replication_slots where slot_name = 'queen_items_src'")).containsExactly("f");
        pair.startStandby();
        queen.connectors().setEnabled("items-src", false);
        awaitPhase(queen, "disabled", 30);
        queen.connectors().setEnabled("items-src", true);
        awaitPhase(queen, "streaming", 30);
        assertThat(StandbyPair.query(pair.primaryPort(),
            "select failover from pg_replication_slots where slot_name = 'queen_items_src'")).containsExactly("t");
        assertThat(logs.linesWith("INFO", "slot queen_items_src is a failover slot now")).hasSize(1);
        sql(pair.primaryPort(), "insert into items values (2, 0)");
        await().atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200)).until(() -> StandbyPair.query(
            pair.standbyPort(), "select synced and not temporary from pg_replication_slots"
                + " where slot_name = 'queen_items_src'").equals(List.of("t")) && lag(pair) == 0);

        pair.killPrimary();
        pair.promote();
        // the promoted server names a slot of its own that no standby streams from (a copied configuration and
        // pg_replslot; PostgreSQL refuses to name a slot that does not exist with ALTER SYSTEM)
        sql(pair.standbyPort(), "select pg_create_physical_replication_slot('" + StandbyPair.STANDBY_SLOT + "')",
            "alter system set synchronized_standby_slots = '" + StandbyPair.STANDBY_SLOT + "'",
            "select pg_reload_conf()");
        queen.connectors().setEnabled("items-src", false);
        awaitPhase(queen, "disabled", 30);
        queen.connectors().setEnabled("items-src", true);
        await().atMost(Duration.ofSeconds(60)).until(() -> !logs.linesWith("WARN", "source 'items-src'",
            "synchronized_standby_slots names " + StandbyPair.STANDBY_SLOT + " (inactive)", "clear it").isEmpty());
        sql(pair.standbyPort(), "alter system reset synchronized_standby_slots", "select pg_reload_conf()");
        sql(pair.standbyPort(), "insert into items values (3, 0)");
        Map<String, Integer> seen = new HashMap<>();
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).untilAsserted(() -> {
          for (Message m : read(queen)) {
            seen.merge(m.partition(), 1, Integer::sum);
          }
          assertThat(seen).containsKey("3");
        });
        assertThat(seen).containsOnly(Map.entry("1", 1), Map.entry("2", 1), Map.entry("3", 1));
      }
    }
  }

  /** The primary's WAL the standby has not replayed yet, in bytes. */
  private static long lag(StandbyPair pair) throws SQLException {
    String sent = StandbyPair.query(pair.primaryPort(), "select pg_current_wal_lsn()").get(0);
    return Long.parseLong(StandbyPair.query(pair.standbyPort(),
        "select greatest(0, '" + sent + "'::pg_lsn - pg_last_wal_replay_lsn())::bigint").get(0));
  }

  /** Inserts rows one per transaction on whichever server is the primary, until told to stop. */
  private static void write(StandbyPair pair, AtomicBoolean writing, AtomicLong next) {
    while (writing.get()) {
      try (Connection c = java.sql.DriverManager.getConnection(pair.url(), "postgres", "postgres");
          Statement st = c.createStatement()) {
        while (writing.get()) {
          st.execute("insert into items values (" + next.get() + ", 1)");
          next.incrementAndGet();
        }
      } catch (SQLException e) {
        try {
          Thread.sleep(100); // the primary is gone: try the URL again
        } catch (InterruptedException ie) {
          return;
        }
      }
    }
  }

  /** A node on the URL that names both servers, re-reading documents and taking over the source quickly. */
  private static Queen node(StandbyPair pair) {
    return EmbeddedQueen.builder().jdbcUrl(pair.url(), "postgres", "postgres")
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)).sourceLeaseTtl(Duration.ofSeconds(3)))
        .start();
  }

  private static void awaitPhase(Queen queen, String phase, int seconds) {
    await().atMost(Duration.ofSeconds(seconds)).pollInterval(Duration.ofMillis(50))
        .until(() -> queen.connectors().status("items-src").map(ConnectorStatus::phase).orElse("").equals(phase));
  }

  private static List<Message> read(Queen queen) {
    List<Message> out = new ArrayList<>();
    while (true) {
      List<Message> got = queen.queue("items").group("check").subscription(SubscriptionMode.ALL).autoAck(true)
          .batch(1000).partitions(1000).pop();
      if (got.isEmpty()) {
        return out;
      }
      out.addAll(got);
    }
  }

  private static void sql(int port, String... statements) throws SQLException {
    try (Connection c = StandbyPair.connect(port); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }
}
