package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.within;
import static io.queen.e2e.SinkFixtures.KEY;
import static io.queen.e2e.SinkFixtures.STATUS;
import static io.queen.e2e.SinkFixtures.lastStatus;
import static io.queen.e2e.SinkFixtures.assertBalances;
import static io.queen.e2e.SinkFixtures.assertLedger;
import static io.queen.e2e.SinkFixtures.count;
import static io.queen.e2e.SinkFixtures.createTables;
import static io.queen.e2e.SinkFixtures.ledgerSink;
import static io.queen.e2e.SinkFixtures.paymentsSink;
import static io.queen.e2e.SinkFixtures.sql;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Queen;
import io.queen.e2e.SinkFixtures.Pusher;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import io.queen.testkit.ChildJvm;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.Slow;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sink nodes in separate JVMs ({@link SinkChild}) killed with SIGKILL mid-batch, a new child each time, while the
 * test keeps pushing: the payments sink ({@code sql} mode, {@code UPDATE accounts SET balance = balance +
 * $1::numeric WHERE id = $2::bigint}, its own connection) and an append sink into {@code ledger} (Queen's own
 * DataSource, no key, so a message applied twice would be two rows) on the same queue, 40 partitions, 4 accounts.
 *
 * <p>Part one, five kills that cannot be anything but mid-batch: the test holds account 1's row lock, so every
 * payments batch blocks inside its transaction on the target (seen in {@code pg_stat_activity} as a
 * {@code queen-sink-pay} backend waiting on a lock) with its leases held, and is killed there. The next child takes
 * the same partitions over from the dead node (the core's "owner stopped heartbeating" expiry), blocks, and is
 * killed again: five times in a row on the same heads, with the queue's {@code retryLimit} at its default 3. No
 * attempt is counted for a take-over (were the sink's group left to count expiries, the fourth take-over would
 * dead-letter those heads and this test would fail at kill 2). Part two, the lock gone and the messages spread over all 40
 * partitions, two more kills of a free-running sink, each right after a payments batch is seen inside its
 * transaction. At the end every balance equals exactly one
 * application of each pushed message, the ledger holds each message exactly once, nothing is dead-lettered, both
 * groups' lag is 0 and every progress row sits at its partition's last offset.
 */
@QueenPostgres
@Slow
class SinkCrashIT {
  private static final Logger LOG = LoggerFactory.getLogger(SinkCrashIT.class);
  private static final String Q = "payments";
  private static final int PARTITIONS = 40;
  private static final int BLOCKED_PARTITIONS = 8;
  private static final int ACCOUNTS = 4;
  private static final int BLOCKED_KILLS = 5;
  private static final int FREE_KILLS = 2;

  private final List<ChildJvm> children = new ArrayList<>();

  @AfterEach
  void stop() {
    children.forEach(ChildJvm::close);
  }

  private ChildJvm child(TestDatabase db) {
    ChildJvm c = SinkFixtures.sinkChild(db);
    children.add(c);
    return c;
  }

  /** Backends of the payments sink waiting on a lock (inside a batch's transaction), by pid. */
  private static Set<Integer> blockedPayBackends(TestDatabase db) throws SQLException {
    Set<Integer> pids = new HashSet<>();
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
        "select pid from pg_stat_activity where datname = current_database() and application_name = 'queen-sink-pay'"
            + " and wait_event_type = 'Lock' and xact_start is not null")) {
      while (rs.next()) {
        pids.add(rs.getInt(1));
      }
    }
    return pids;
  }

  private static Set<Long> leasedBy(TestDatabase db, String group, String node) throws SQLException {
    Set<Long> out = new HashSet<>();
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement("select partition_id from queen.cursors"
        + " where group_name = ? and lease_owner = ? and lease_id is not null")) {
      st.setString(1, group);
      st.setString(2, node);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getLong(1));
        }
      }
    }
    return out;
  }

  @Test
  @Timeout(value = 150, unit = TimeUnit.SECONDS)
  void sinkNodesKilledMidBatchApplyEveryMessageExactlyOnceAndDeadLetterNothing(TestDatabase db, DataSource ds)
      throws Exception {
    long t0 = System.nanoTime();
    createTables(db, ACCOUNTS);
    // a killed client's backend notices at once even while it waits on a lock (as a TCP reset would make it)
    sql(db, "alter database \"" + db.name() + "\" set client_connection_check_interval = '200ms'");
    try (Queen observer = EmbeddedQueen.builder().dataSource(ds).nodeId("observer").encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      observer.queue(Q).configure(c -> c); // the defaults: retryLimit 3, lease 30 s
      assertThat(observer.queue(Q).config().retryLimit()).isEqualTo(3);
      // batch 500 (from up to 500 partitions): the first blocked batch leases every partition that has messages,
      // and what arrives meanwhile lands in those leased partitions, so each next child can only take them over
      // from the dead node (once its 2 s session timeout has passed): the same heads, expired again and again
      observer.connectors().put("pay", paymentsSink(db, Q, 2, 500));
      observer.connectors().put("ledger", ledgerSink(Q, 2, 50));
      // part one pushes to 8 of the 40 partitions, so that the first child's first batch leases every partition
      // that will get messages until the lock goes
      Pusher pusher = new Pusher(observer, Q, BLOCKED_PARTITIONS, ACCOUNTS, 50);
      try {
        // ---- part one: every payments batch blocks on account 1 inside its transaction, and is killed there
        Set<Integer> seen = new HashSet<>();
        Set<Long> previouslyHeld = Set.of();
        int heldAgain = 0;
        try (Connection lock = db.connection()) {
          lock.setAutoCommit(false);
          try (Statement st = lock.createStatement()) {
            st.execute("select * from accounts where id = 1 for update");
          }
          for (int k = 1; k <= BLOCKED_KILLS; k++) {
            ChildJvm victim = child(db);
            String node = victim.awaitLine(l -> l.startsWith("READY "), Duration.ofSeconds(60)).substring(6).trim();
            Set<Integer> fresh = new HashSet<>();
            Set<Long> before = previouslyHeld;
            within(Duration.ofSeconds(40)).pollInterval(Duration.ofMillis(50)).until(() -> {
              fresh.clear();
              fresh.addAll(blockedPayBackends(db));
              fresh.removeAll(seen);
              Set<Long> now = leasedBy(db, "pg-pay", node);
              return !fresh.isEmpty() && !now.isEmpty() && (before.isEmpty() || now.stream().anyMatch(before::contains));
            });
            Set<Long> held = leasedBy(db, "pg-pay", node);
            Set<Long> again = new HashSet<>(held);
            again.retainAll(previouslyHeld);
            heldAgain += again.size();
            victim.kill();
            assertThat(victim.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
            seen.addAll(fresh);
            long maxAttempts = count(db, "select coalesce(max(attempts), 0) from queen.cursors where group_name = 'pg-pay'");
            LOG.info("blocked kill {}: node {} killed with {} backend(s) blocked mid-batch holding {} partition lease(s),"
                + " {} of them taken over from the previous dead node; pushed so far {}; max attempts {}", k, node,
                fresh.size(), held.size(), again.size(), pusher.pushed(), maxAttempts);
            assertThat(maxAttempts).as("a lease lost to a crash is no attempt for a sink's group").isZero();
            previouslyHeld = held;
          }
          lock.rollback();
        }
        assertThat(heldAgain).as("the same heads were killed mid-batch again and again").isPositive();
        assertThat(count(db, "select count(*) from queen.dead_letters")).isZero();

        // ---- part two: the lock gone, a free-running sink killed right after a batch is seen inside its
        // transaction; account updates now take 1 ms each, so batches spend their time there
        sql(db, "create function slow_row() returns trigger language plpgsql as $$ begin perform pg_sleep(0.001);"
            + " return new; end $$", "create trigger slow_row before update on accounts for each row execute function slow_row()");
        pusher.pause(10);
        pusher.spread(PARTITIONS);
        for (int k = 1; k <= FREE_KILLS; k++) {
          ChildJvm victim = child(db);
          victim.awaitLine(l -> {
            Matcher m = STATUS.matcher(l);
            return m.find() && m.group(1).equals("pay") && Long.parseLong(m.group(3)) >= 200;
          }, Duration.ofSeconds(60));
          Thread.sleep(300 + 400L * k);
          long[] inTx = new long[1];
          within(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(2)).until(() -> {
            inTx[0] = count(db, "select count(*) from pg_stat_activity where datname = current_database()"
                + " and application_name = 'queen-sink-pay' and xact_start is not null and state <> 'idle'");
            return inTx[0] > 0;
          });
          victim.kill(); // right after seeing a payments batch inside its transaction
          assertThat(victim.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
          LOG.info("free kill {}: {} payments backend(s) seen inside a batch just before the kill; pushed so far {}", k,
              inTx[0], pusher.pushed());
        }
        ChildJvm last = child(db);
        last.awaitLine(l -> l.startsWith("READY "), Duration.ofSeconds(60));
        Thread.sleep(1_500);
      } finally {
        pusher.close();
      }
      long pushed = pusher.pushed();
      within(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
          .until(() -> lag(observer, Q, "pg-pay") == 0 && lag(observer, Q, "pg-ledger") == 0);

      // ---- every row exact
      assertBalances(db, pusher);
      assertLedger(db, pusher);
      assertThat(observer.deadLetters(Q).group("pg-pay").count()).isZero();
      assertThat(observer.deadLetters(Q).group("pg-ledger").count()).isZero();
      assertThat(count(db, "select count(*) from queen.dead_letters")).isZero();
      assertThat(count(db, "select coalesce(max(attempts), 0) from queen.cursors where group_name like 'pg-%'")).isZero();
      for (String sink : List.of("pay", "ledger")) {
        assertThat(count(db, "select count(*) from queen.partitions p join queen.queues q on q.id = p.queue_id"
            + " left join queen.sink_progress sp on sp.partition_id = p.id and sp.sink = ?"
            + " where q.name = ? and coalesce(sp.last_offset, -1) <> p.next_offset - 1", sink, Q))
            .as("every progress row of %s at its partition's last offset", sink).isZero();
      }
      long appliedRows = count(db, "select count(*) from ledger");
      long skipped = 0;
      long applied = 0;
      long errors = 0;
      for (ChildJvm c : children) {
        for (String sink : List.of("pay", "ledger")) {
          long[] s = lastStatus(c, sink);
          applied += s[0];
          skipped += s[1];
          errors += s[4];
        }
      }
      LOG.info("SinkCrashIT: {} messages pushed over {} partitions, {} kills ({} blocked mid-batch on the same heads,"
          + " {} free), {} ledger rows, every balance exact, 0 dead letters; counters of the children as last printed:"
          + " applied {}, skipped {} (redeliveries recognized), errors {}; {} s", pushed, PARTITIONS,
          BLOCKED_KILLS + FREE_KILLS, BLOCKED_KILLS, FREE_KILLS, appliedRows, applied, skipped, errors,
          (System.nanoTime() - t0) / 1_000_000_000);
    }
  }
}
