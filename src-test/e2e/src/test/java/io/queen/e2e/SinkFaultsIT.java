package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.within;
import static io.queen.e2e.SinkFixtures.KEY;
import static io.queen.e2e.SinkFixtures.assertBalances;
import static io.queen.e2e.SinkFixtures.assertLedger;
import static io.queen.e2e.SinkFixtures.count;
import static io.queen.e2e.SinkFixtures.createTables;
import static io.queen.e2e.SinkFixtures.ledgerSink;
import static io.queen.e2e.SinkFixtures.paymentsSink;
import static io.queen.e2e.SinkFixtures.sql;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.ConnectorStatus;
import io.queen.DeadLetter;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.e2e.SinkFixtures.Pusher;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import io.queen.testkit.LogCapture;
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
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sink under faults inside one JVM, each test in a database of its own: the target's backends terminated
 * mid-batch, two nodes contending for one partition while their leases are taken from under them, and poison
 * messages among good ones. Every row is counted at the end.
 */
@QueenPostgres
class SinkFaultsIT {
  private static final Logger LOG = LoggerFactory.getLogger(SinkFaultsIT.class);
  private static final ObjectMapper M = new ObjectMapper();
  private static final String Q = "payments";

  private static Queen node(TestDatabase t, String id) {
    return EmbeddedQueen.builder().jdbcUrl(t.jdbcUrl(), t.user(), t.password()).poolSize(12).nodeId(id).encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .sessionTimeout(Duration.ofSeconds(2)).start();
  }

  /** Every account update sleeps 2 ms, so a batch of 50 spends most of its time inside its transaction. */
  private static void slowAccounts(TestDatabase t) throws SQLException {
    sql(t, "create function slow_row() returns trigger language plpgsql as $$ begin perform pg_sleep(0.002); return new; end $$",
        "create trigger slow_row before update on accounts for each row execute function slow_row()");
  }

  private static void assertProgressAtTheEnd(TestDatabase t, String sink) throws SQLException {
    assertThat(count(t, "select count(*) from queen.partitions p join queen.queues q on q.id = p.queue_id"
        + " left join queen.sink_progress sp on sp.partition_id = p.id and sp.sink = ?"
        + " where q.name = ? and coalesce(sp.last_offset, -1) <> p.next_offset - 1", sink, Q))
        .as("every progress row of %s at its partition's last offset", sink).isZero();
    assertThat(count(t, "select count(*) from queen.sink_progress sp where sp.sink = ? and not exists"
        + " (select 1 from queen.partitions p where p.id = sp.partition_id and p.name = sp.partition)", sink))
        .as("every progress row names its partition").isZero();
  }

  private static Map<String, Long> counters(Queen q, String name) {
    return q.connectors().status(name).map(ConnectorStatus::counters).orElseThrow();
  }

  @Slow
  @Test
  @Timeout(value = 150, unit = TimeUnit.SECONDS)
  void theTargetsBackendsTerminatedMidBatchNeverDeadLetterAndEveryRowIsExact(TestDatabase db) throws Exception {
    try (TestDatabase t = db.server().createDatabase("sinkterm")) {
      createTables(t, 4);
      slowAccounts(t);
      int terminated = 0;
      int rounds = 0;
      Pusher pusher;
      try (LogCapture logs = LogCapture.start(); Queen q = node(t, "term-a")) {
        q.queue(Q).configure(c -> c);
        q.connectors().put("pay", paymentsSink(t, Q, 2, 50));
        pusher = new Pusher(q, Q, 40, 4, 10);
        try {
          within(Duration.ofSeconds(20)).until(() -> counters(q, "pay").getOrDefault("applied", 0L) > 100);
          long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(12);
          while (System.nanoTime() < end && terminated < 25) {
            rounds++;
            terminated += (int) count(t, "select count(pg_terminate_backend(pid)) from pg_stat_activity"
                + " where datname = current_database() and application_name = 'queen-sink-pay'"
                + " and xact_start is not null and pid <> pg_backend_pid()");
            Thread.sleep(250);
          }
        } finally {
          pusher.close();
        }
        // two workers' batches over 4 accounts cross often, and each deadlock costs deadlock_timeout (1 s): under a
        // loaded suite the drain once took more than a minute, with the sink retrying a deadlock about every second
        within(Duration.ofSeconds(110)).pollInterval(Duration.ofMillis(200)).until(() -> lag(q, Q, "pg-pay") == 0);
        assertBalances(t, pusher);
        assertThat(q.deadLetters(Q).group("pg-pay").count()).isZero();
        assertThat(count(t, "select count(*) from queen.dead_letters")).isZero();
        assertThat(count(t, "select coalesce(max(attempts), 0) from queen.cursors where group_name = 'pg-pay'")).isZero();
        assertProgressAtTheEnd(t, "pay");
        Map<String, Long> c = counters(q, "pay");
        LOG.info("terminate: {} messages over 40 partitions, {} backend(s) terminated inside a batch in {} rounds;"
            + " every balance exact, 0 dead letters; sink counters {}", pusher.pushed(), terminated, rounds, c);
        assertThat(terminated).as("backends terminated inside a batch").isGreaterThanOrEqualTo(5);
        assertThat(c.get("errors")).as("the sink saw the failures").isPositive();
        assertThat(c.get("dlq")).isZero();
        // a batch whose commit reached the server while its connection died is recognised on the retry (skipped)
        assertThat(c.get("applied")).isLessThanOrEqualTo(pusher.pushed());
        assertThat(c.get("applied") + c.get("skipped")).isGreaterThanOrEqualTo(pusher.pushed());
        assertThat(logs.linesWith("sink 'pay'")).as("the failures were logged").isNotEmpty();
        assertThat(logs.lines()).as("no statement text or value in any log line").noneMatch(l ->
            l.contains("UPDATE accounts") || l.contains("::numeric"));
        if (t.password().length() >= 6 && !"jdbc:postgresql".contains(t.password())) {
          assertThat(logs.text()).as("the password in no log line").doesNotContain(t.password());
        }
      }
    }
  }

  @Slow
  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void twoNodesContendingForOnePartitionWhileTheirLeasesAreTakenApplyEveryRowOnce(TestDatabase db) throws Exception {
    try (TestDatabase t = db.server().createDatabase("sinkone")) {
      createTables(t, 4);
      slowAccounts(t);
      Pusher pusher;
      AtomicBoolean stealing = new AtomicBoolean(true);
      AtomicInteger stolen = new AtomicInteger();
      try (Queen a = node(t, "one-a"); Queen b = node(t, "one-b")) {
        a.queue(Q).configure(c -> c);
        a.connectors().put("pay", paymentsSink(t, Q, 4, 20));
        a.connectors().put("ledger", ledgerSink(Q, 4, 20));
        pusher = new Pusher(a, Q, 1, 4, 10); // every message into partition "only"
        // a slow node's lease running out under it: expire the groups' leases in the database now and then, so
        // that another worker (of either node) takes the partition while the first is still inside its batch
        Thread thief = new Thread(() -> {
          while (stealing.get()) {
            try (Connection c = t.connection(); Statement st = c.createStatement()) {
              stolen.addAndGet(st.executeUpdate("update queen.cursors set lease_expires_at = now()"
                  + " where group_name like 'pg-%' and lease_id is not null and lease_expires_at > now()"));
              Thread.sleep(150);
            } catch (InterruptedException e) {
              return;
            } catch (SQLException e) {
              LOG.warn("thief: {}", e.getSQLState());
            }
          }
        }, "test-lease-thief");
        thief.setDaemon(true);
        thief.start();
        try {
          Thread.sleep(10_000);
        } finally {
          pusher.close();
          stealing.set(false);
          thief.join(5_000);
        }
        within(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> lag(a, Q, "pg-pay") == 0 && lag(a, Q, "pg-ledger") == 0);
        assertThat(count(t, "select count(*) from queen.partitions")).isEqualTo(1);
        assertBalances(t, pusher);
        assertLedger(t, pusher);
        assertThat(count(t, "select count(*) from queen.dead_letters")).isZero();
        assertThat(count(t, "select coalesce(max(attempts), 0) from queen.cursors where group_name like 'pg-%'")).isZero();
        for (String sink : List.of("pay", "ledger")) {
          assertProgressAtTheEnd(t, sink);
          assertThat(count(t, "select last_offset from queen.sink_progress where sink = ?", sink))
              .isEqualTo(pusher.pushed() - 1);
        }
        Map<String, Long> pa = counters(a, "pay");
        Map<String, Long> pb = counters(b, "pay");
        Map<String, Long> la = counters(a, "ledger");
        Map<String, Long> lb = counters(b, "ledger");
        long skipped = pa.get("skipped") + pb.get("skipped") + la.get("skipped") + lb.get("skipped");
        LOG.info("one partition, 2 nodes x 4 workers per sink: {} messages, {} leases expired under their holders;"
            + " pay a {} b {}; ledger a {} b {}; skipped in all {}", pusher.pushed(), stolen.get(), pa, pb, la, lb,
            skipped);
        assertThat(pa.get("applied") + pb.get("applied")).as("each message applied once by one node or the other")
            .isEqualTo(pusher.pushed());
        assertThat(la.get("applied") + lb.get("applied")).isEqualTo(pusher.pushed());
        assertThat(pa.get("batches") * pb.get("batches")).as("both nodes did work").isPositive();
        assertThat(skipped).as("a batch that found its work done by the other holder").isPositive();
      }
    }
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void aPoisonMessageIsDeadLetteredWithTheDatabasesErrorAndItsPartitionGoesOn(TestDatabase db) throws Exception {
    try (TestDatabase t = db.server().createDatabase("sinkpoison")) {
      sql(t, "create table items(id bigint primary key, qty int not null constraint qty_not_negative check (qty >= 0))");
      try (LogCapture logs = LogCapture.start(); Queen q = node(t, "poison-a")) {
        q.queue("items").configure(c -> c);
        q.connectors().put("strict", """
            {"kind": "sink", "sink": {"queue": "items", "table": "items", "mode": "append", "batchSize": 10,
                                      "maxAttempts": 3}}""");
        List<PushItem> items = new ArrayList<>();
        Set<Long> good = new HashSet<>();
        for (int p = 0; p < 4; p++) {
          for (int i = 0; i < 10; i++) {
            long id = p * 100L + i;
            Object payload;
            if (p == 1 && i == 3) {
              payload = Map.of("id", id, "qty", -987654); // refused by the check constraint
            } else if (p == 2 && i == 6) {
              payload = Map.of("id", id, "qty", "secret-abc"); // not an integer
            } else if (p == 3 && i == 0) {
              payload = M.getNodeFactory().textNode("not an object"); // the mode cannot read it
            } else {
              payload = Map.of("id", id, "qty", i);
              good.add(id);
            }
            items.add(PushItem.of("p" + p, payload));
          }
        }
        q.queue("items").push(items);
        within(Duration.ofSeconds(40)).pollInterval(Duration.ofMillis(100))
            .until(() -> lag(q, "items", "pg-strict") == 0);
        Set<Long> rows = new HashSet<>();
        try (Connection c = t.connection(); Statement st = c.createStatement();
            ResultSet rs = st.executeQuery("select id from items")) {
          while (rs.next()) {
            rows.add(rs.getLong(1));
          }
        }
        assertThat(rows).as("every good message applied, those after the poison in its partition included")
            .isEqualTo(good);
        List<DeadLetter> dead = new ArrayList<>(q.deadLetters("items").group("pg-strict").list(10, null));
        dead.sort(Comparator.comparing(DeadLetter::partition));
        assertThat(dead).extracting(DeadLetter::partition, DeadLetter::offset)
            .containsExactly(org.assertj.core.groups.Tuple.tuple("p1", 3L), org.assertj.core.groups.Tuple.tuple("p2", 6L),
                org.assertj.core.groups.Tuple.tuple("p3", 0L));
        for (DeadLetter d : dead) {
          LOG.info("dead letter {}/{}: {}", d.partition(), d.offset(), d.error());
          assertThat(d.error()).contains("sink 'strict' gave up after 3 attempt(s)")
              .doesNotContain("987654").doesNotContain("secret-abc").doesNotContain("Failing row")
              .doesNotContain("insert into");
        }
        assertThat(dead.get(0).error()).contains("qty_not_negative");
        assertThat(dead.get(1).error()).contains("invalid input syntax for type integer");
        assertThat(dead.get(2).error()).contains("payload is not a JSON object");
        Map<String, Long> c = counters(q, "strict");
        assertThat(c.get("dlq")).isEqualTo(3);
        assertThat(c.get("applied")).isEqualTo(good.size());
        assertProgressAtTheEnd(t, "strict", "items");
        assertThat(logs.linesWith("Sink - ", "refused 3 time(s), dead-lettered")).hasSize(3);
        assertThat(logs.lines()).as("no value in any log line").noneMatch(l -> l.contains("987654")
            || l.contains("secret-abc") || l.contains("not an object\""));
      }
    }
  }

  private static void assertProgressAtTheEnd(TestDatabase t, String sink, String queue) throws SQLException {
    try (Connection c = t.connection(); PreparedStatement st = c.prepareStatement("select count(*) from queen.partitions p"
        + " join queen.queues q on q.id = p.queue_id left join queen.sink_progress sp on sp.partition_id = p.id"
        + " and sp.sink = ? where q.name = ? and coalesce(sp.last_offset, -1) <> p.next_offset - 1")) {
      st.setString(1, sink);
      st.setString(2, queue);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        assertThat(rs.getLong(1)).as("progress of %s at every partition's last offset", sink).isZero();
      }
    }
  }
}
