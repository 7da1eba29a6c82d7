package io.queen.e2e;

import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import io.queen.testkit.ChildJvm;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.Slow;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The source's exactly-once claim, proven by killing its owner: source nodes in separate JVMs ({@link SourceChild})
 * SIGKILLed mid-stream and mid-snapshot, a new one each time, while a writer keeps changing the table (inserts,
 * updates, deletes, key changes, several per transaction), plus walsenders terminated under a live owner. A trigger
 * keeps an audit of every row change in commit order per key; at the end the queue holds exactly one message per
 * change, per partition in that order (stream), and the snapshot's rows replay to the table's final state without
 * an older version of a row ever following a newer one.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Slow
class SourceCrashIT {
  private static final Logger LOG = LoggerFactory.getLogger(SourceCrashIT.class);
  

  private final List<ChildJvm> children = new ArrayList<>();
  /** Per test (one database serves the class): the table, its audit, the queue and the connector. */
  private static final java.util.concurrent.atomic.AtomicInteger TESTS = new java.util.concurrent.atomic.AtomicInteger();
  private int n;
  private String src;
  private String queue;

  @org.junit.jupiter.api.BeforeEach
  void names() {
    n = TESTS.incrementAndGet();
    src = "src-" + n;
    queue = "q-" + n;
  }

  /** The test's own names in {@code sql}: {@code items} and {@code audit} carry the test's number. */
  private String t(String sql) {
    return sql.replace("items", "items" + n).replace("audit", "audit" + n);
  }

  private TestDatabase db;

  @AfterEach
  void stop() {
    children.forEach(ChildJvm::close);
    if (db != null) {
      // the next test's nodes must not run this one's source; deleting it drops its slot
      try (Queen q = EmbeddedQueen.builder().dataSource(db.dataSource())
          .connectors(ConnectorOptions.defaults().run(false)).start()) {
        q.connectors().delete(src);
      }
    }
  }

  private ChildJvm child(TestDatabase db) {
    this.db = db;
    ChildJvm c = ChildJvm.builder(SourceChild.class).jvmOptions("-Xmx256m", "-XX:TieredStopAtLevel=1")
        .args(db.jdbcUrl(), db.user(), db.password()).start();
    children.add(c);
    return c;
  }

  void sql(TestDatabase db, String... statements) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(t(s));
      }
    }
  }

  long count(TestDatabase db, String query) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(t(query))) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /** The table, and an audit of every row change (a key change as a d of the old key and a c of the new one). */
  void createTables(TestDatabase db) throws SQLException {
    sql(db, "create table items (id bigint primary key, ver int not null, note text)",
        "create table audit (seq bigserial primary key, id bigint not null, op text not null, ver int)",
        "create function audit_items() returns trigger language plpgsql as $$ begin"
            + " if tg_op = 'DELETE' then insert into audit (id, op, ver) values (old.id, 'd', old.ver); return old; end if;"
            + " if tg_op = 'UPDATE' and new.id <> old.id then"
            + "   insert into audit (id, op, ver) values (old.id, 'd', old.ver);"
            + "   insert into audit (id, op, ver) values (new.id, 'c', new.ver); return new; end if;"
            + " insert into audit (id, op, ver) values (new.id, case tg_op when 'INSERT' then 'c' else 'u' end, new.ver);"
            + " return new; end $$",
        "create trigger audit_items after insert or update or delete on items for each row execute function audit_items()");
  }

  /** One writer: transactions of 1..4 changes on its own connection, until stopped. */
  final class Writer implements AutoCloseable {
    final AtomicBoolean stop = new AtomicBoolean();
    final AtomicLong transactions = new AtomicLong();
    final Thread thread;
    final List<Long> live = new ArrayList<>();
    long nextId;
    volatile Throwable failure;

    Writer(TestDatabase db, long firstId, List<Long> existing, boolean keyChanges) {
      nextId = firstId;
      live.addAll(existing);
      Random rnd = new Random(42);
      thread = new Thread(() -> {
        try (Connection c = db.connection()) {
          c.setAutoCommit(false);
          try (PreparedStatement ins = c.prepareStatement(t("insert into items (id, ver, note) values (?, 1, ?)"));
              PreparedStatement upd = c.prepareStatement(t("update items set ver = ver + 1 where id = ?"));
              PreparedStatement del = c.prepareStatement(t("delete from items where id = ?"));
              PreparedStatement move = c.prepareStatement(t("update items set id = ?, ver = ver + 1 where id = ?"))) {
            while (!stop.get()) {
              int n = 1 + rnd.nextInt(4);
              for (int i = 0; i < n; i++) {
                int what = rnd.nextInt(10);
                if (live.size() < 50 || what < 3) {
                  long id = nextId++;
                  ins.setLong(1, id);
                  ins.setString(2, "note | \\ " + id);
                  ins.executeUpdate();
                  live.add(id);
                } else if (what < 8) {
                  upd.setLong(1, live.get(rnd.nextInt(live.size())));
                  upd.executeUpdate();
                } else if (what < 9 || !keyChanges) {
                  long id = live.remove(rnd.nextInt(live.size()));
                  del.setLong(1, id);
                  del.executeUpdate();
                } else {
                  int at = rnd.nextInt(live.size());
                  long to = nextId++;
                  move.setLong(1, to);
                  move.setLong(2, live.get(at));
                  move.executeUpdate();
                  live.set(at, to);
                }
              }
              c.commit();
              transactions.incrementAndGet();
              Thread.sleep(rnd.nextInt(3));
            }
          }
        } catch (Throwable t) {
          failure = t;
        }
      }, "writer");
      thread.setDaemon(true);
      thread.start();
    }

    @Override
    public void close() throws InterruptedException {
      stop.set(true);
      thread.join(10_000);
      assertThat(failure).as("the writer failed").isNull();
    }
  }

  /** Reads every message of the queue from the beginning with a group of its own, per partition in offset order. */
  static final class Reader {
    final Map<String, List<Message>> byPartition = new TreeMap<>();
    final Map<String, String> ids = new HashMap<>();
    int total;
    int duplicateIds;

    void drain(Queen queen, String queue) {
      while (true) {
        List<Message> got = queen.queue(queue).group("check").subscription(SubscriptionMode.ALL)
            .autoAck(true).batch(2000).partitions(1000).pop();
        if (got.isEmpty()) {
          return;
        }
        for (Message m : got) {
          byPartition.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m);
          total++;
          if (ids.put(m.partition() + "/" + m.transactionId(), String.valueOf(m.id())) != null) {
            duplicateIds++;
          }
        }
      }
    }
  }

  Map<Long, List<String>> audit(TestDatabase db) throws SQLException {
    Map<Long, List<String>> out = new TreeMap<>();
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery(t("select id, op, ver from audit order by seq"))) {
      while (rs.next()) {
        String op = rs.getString(2);
        out.computeIfAbsent(rs.getLong(1), k -> new ArrayList<>()).add(op.equals("d") ? "d" : op + ":" + rs.getInt(3));
      }
    }
    return out;
  }

  /** The table as the events describe it: per key, the last version, a delete removing the row. */
  static Map<Long, Integer> replay(Reader reader) {
    Map<Long, Integer> replayed = new TreeMap<>();
    reader.byPartition.forEach((p, msgs) -> {
      for (Message m : msgs) {
        JsonNode e = m.payload();
        if (e.get("op").asText().equals("d")) {
          replayed.remove(Long.parseLong(p));
        } else {
          replayed.put(Long.parseLong(p), e.get("after").get("ver").asInt());
        }
      }
    });
    return replayed;
  }

  static String describe(JsonNode event) {
    String op = event.get("op").asText();
    return op.equals("d") ? "d" : op + ":" + event.get("after").get("ver").asInt();
  }

  /** The snapshot's rows in the test's queue so far (its {@code r} events). */
  long snapshotted(TestDatabase db) throws SQLException {
    return count(db, "select count(*) from queen.messages m join queen.partitions p on p.id = m.partition_id"
        + " join queen.queues q on q.id = p.queue_id where q.name = '" + queue + "' and m.payload ->> 'op' = 'r'");
  }

  static void awaitPhase(ChildJvm c, String src, String phase, Duration within) {
    c.awaitLine(l -> l.startsWith("STATUS " + src + " " + phase), within);
  }

  int walsendersTerminated(TestDatabase db) throws SQLException {
    return (int) count(db, "select count(*) from (select pg_terminate_backend(pid) from pg_stat_activity"
        + " where backend_type = 'walsender' and datname = current_database()) t");
  }

  @Test
  @Timeout(value = 240, unit = TimeUnit.SECONDS)
  void ownersKilledMidStreamLoseAndDuplicateNothing(TestDatabase db, DataSource ds) throws Exception {
    createTables(db);
    Random rnd = new Random(7);
    try (Queen observer = EmbeddedQueen.builder().dataSource(ds).nodeId("observer")
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      observer.connectors().put(src, t("{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.items\","
          + " \"queue\": \"" + queue + "\"}], \"snapshot\": \"never\", \"maxBundleMessages\": 50}}"));
      ChildJvm first = child(db);
      awaitPhase(first, src, "streaming", Duration.ofSeconds(60));
      int kills = 0;
      int terminated = 0;
      try (Writer writer = new Writer(db, 1, List.of(), true)) {
        ChildJvm owner = first;
        for (int k = 1; k <= 6; k++) {
          Thread.sleep(400 + rnd.nextInt(1200));
          if (k % 3 == 0) {
            terminated += walsendersTerminated(db); // the replication connection killed under a live owner
            Thread.sleep(500 + rnd.nextInt(500));
          }
          owner.kill();
          assertThat(owner.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
          kills++;
          LOG.info("kill {}: owner killed mid-stream after {} writer transactions", k, writer.transactions.get());
          owner = child(db);
          awaitPhase(owner, src, "streaming", Duration.ofSeconds(60));
        }
        Thread.sleep(1000);
      }
      long changes = count(db, "select count(*) from audit");
      Reader reader = new Reader();
      within(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(500)).until(() -> {
        reader.drain(observer, queue);
        return reader.total >= changes;
      });
      Thread.sleep(3000); // anything still coming would be a duplicate
      reader.drain(observer, queue);
      LOG.info("{} kills, {} walsenders terminated, {} changes audited, {} messages", kills, terminated, changes,
          reader.total);
      assertThat(reader.duplicateIds).isZero();
      assertThat(reader.total).as("one message per change").isEqualTo(changes);
      Map<Long, List<String>> expected = audit(db);
      Map<Long, List<String>> got = new TreeMap<>();
      reader.byPartition.forEach((p, msgs) -> {
        List<String> l = new ArrayList<>();
        msgs.forEach(m -> l.add(describe(m.payload())));
        got.put(Long.parseLong(p), l);
      });
      assertThat(got).as("per key, every change once, in commit order").isEqualTo(expected);
      assertThat(count(db, "select count(*) from queen.dead_letters")).isZero();
    }
  }

  @Test
  @Timeout(value = 240, unit = TimeUnit.SECONDS)
  void ownersKilledMidSnapshotNeverDeliverAnOlderRowAfterANewerOne(TestDatabase db, DataSource ds) throws Exception {
    createTables(db);
    int rows = 20_000;
    sql(db, "insert into items (id, ver, note) select g, 1, 'seed ' || g from generate_series(1, " + rows + ") g");
    List<Long> existing = new ArrayList<>();
    for (long i = 1; i <= rows; i++) {
      existing.add(i);
    }
    Random rnd = new Random(11);
    try (Queen observer = EmbeddedQueen.builder().dataSource(ds).nodeId("observer")
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      observer.connectors().put(src, t("{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.items\","
          + " \"queue\": \"" + queue + "\"}], \"snapshotChunkRows\": 500}}"));
      int kills = 0;
      try (Writer writer = new Writer(db, rows + 1, existing, false)) {
        ChildJvm owner = child(db);
        for (int k = 1; k <= 4; k++) {
          awaitPhase(owner, src, "snapshot", Duration.ofSeconds(60));
          // killed once the snapshot is past another sixth of the table and up to a chunk and a half more, however
          // fast the machine: each owner snapshots some rows, and the fourth dies with thousands of rows to go (the
          // assertion below)
          long past = (long) k * rows / 6 + rnd.nextInt(750);
          within(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(20)).until(() -> snapshotted(db) >= past);
          owner.kill();
          assertThat(owner.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
          long done = snapshotted(db);
          assertThat(done).as("rows snapshotted when owner %d was killed", k).isLessThan(rows);
          kills++;
          LOG.info("kill {}: owner killed mid-snapshot, {} of {} rows snapshotted", k, done, rows);
          owner = child(db);
        }
        awaitPhase(owner, src, "streaming", Duration.ofSeconds(120));
        Thread.sleep(1000);
      }
      Map<Long, Integer> table = new TreeMap<>();
      try (Connection c = db.connection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery(t("select id, ver from items"))) {
        while (rs.next()) {
          table.put(rs.getLong(1), rs.getInt(2));
        }
      }
      Reader reader = new Reader();
      within(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(500)).until(() -> {
        reader.drain(observer, queue);
        return replay(reader).equals(table);
      });
      Thread.sleep(3000);
      reader.drain(observer, queue);
      assertThat(reader.duplicateIds).isZero();
      int older = 0;
      int repeatedReads = 0;
      for (Map.Entry<String, List<Message>> e : reader.byPartition.entrySet()) {
        int last = 0;
        int reads = 0;
        for (Message m : e.getValue()) {
          JsonNode ev = m.payload();
          String op = ev.get("op").asText();
          if (op.equals("r")) {
            reads++;
          }
          if (op.equals("d")) {
            last = 0;
            continue;
          }
          int ver = ev.get("after").get("ver").asInt();
          if (ver < last) {
            older++;
          }
          last = ver;
        }
        if (reads > 1) {
          repeatedReads++;
        }
      }
      LOG.info("{} kills, {} messages over {} partitions", kills, reader.total, reader.byPartition.size());
      assertThat(kills).as("owners killed during the snapshot").isEqualTo(4);
      assertThat(older).as("an older version of a row after a newer one").isZero();
      assertThat(repeatedReads).as("rows read by the snapshot more than once").isZero();
      assertThat(replay(reader)).as("the events replayed per key give the table's final state").isEqualTo(table);
    }
  }

  @Test
  @Timeout(value = 300, unit = TimeUnit.SECONDS)
  void aBigTransactionWhoseOwnerIsKilledHalfwayArrivesOnce(TestDatabase db, DataSource ds) throws Exception {
    createTables(db);
    int rows = 200_000;
    try (Queen observer = EmbeddedQueen.builder().dataSource(ds).nodeId("observer")
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      observer.connectors().put(src, t("{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.items\","
          + " \"queue\": \"" + queue + "\", \"partitionBy\": \"single\"}], \"snapshot\": \"never\", \"maxBundleMessages\": 5000}}"));
      ChildJvm owner = child(db);
      awaitPhase(owner, src, "streaming", Duration.ofSeconds(60));
      sql(db, "insert into items (id, ver, note) select g, 1, 'big ' || g from generate_series(1, " + rows + ") g");
      // killed once a part of the transaction is in Queen and the rest is not
      within(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(20)).until(() -> {
        long n = count(db, "select coalesce(sum(p.next_offset - p.first_offset), 0) from queen.partitions p"
            + " join queen.queues q on q.id = p.queue_id where q.name = '" + queue + "'");
        return n >= rows / 3;
      });
      owner.kill();
      assertThat(owner.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
      long atKill = count(db, "select coalesce(sum(p.next_offset - p.first_offset), 0) from queen.partitions p"
          + " join queen.queues q on q.id = p.queue_id where q.name = '" + queue + "'");
      LOG.info("owner killed with {} of {} changes of one transaction in Queen", atKill, rows);
      assertThat(atKill).isLessThan(rows);
      child(db);
      Reader reader = new Reader();
      within(Duration.ofSeconds(180)).pollInterval(Duration.ofMillis(500)).until(() -> {
        reader.drain(observer, queue);
        return reader.total >= rows;
      });
      Thread.sleep(3000);
      reader.drain(observer, queue);
      assertThat(reader.duplicateIds).isZero();
      assertThat(reader.total).isEqualTo(rows);
      List<Message> all = reader.byPartition.get("all");
      assertThat(all).hasSize(rows);
      String lsn = all.get(0).payload().get("lsn").asText();
      for (int i = 0; i < rows; i++) {
        JsonNode e = all.get(i).payload();
        assertThat(e.get("after").get("id").asLong()).as("commit order inside the transaction").isEqualTo(i + 1L);
        assertThat(e.get("lsn").asText()).as("every piece carries the transaction's lsn").isEqualTo(lsn);
      }
    }
  }
}
