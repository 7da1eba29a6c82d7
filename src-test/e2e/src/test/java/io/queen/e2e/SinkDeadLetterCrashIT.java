package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.terminateBackends;
import static io.queen.e2e.E2e.within;
import static io.queen.e2e.SinkFixtures.KEY;
import static io.queen.e2e.SinkFixtures.lastStatus;
import static io.queen.e2e.SinkFixtures.count;
import static io.queen.e2e.SinkFixtures.sql;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.DeadLetter;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
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
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sink nodes in separate JVMs ({@link SinkChild}) killed with SIGKILL, a new child each time, while the test keeps
 * pushing a stream with poison messages in it: about 3 % of the messages carry {@code qty} -1, which the target
 * table's {@code CHECK (qty > 0)} refuses. Two append sinks read the same queue (20 partitions, 2 workers, batch 50),
 * each into a table of its own with no key, so a message applied twice would be two rows: {@code one} through
 * Queen's DataSource with {@code maxAttempts} 1 (a poison message is dead-lettered at its first refusal, inside an
 * ordinary batch), and {@code two} through its own connection with {@code maxAttempts} 2 (a poison refused in a
 * statement of its own is a {@code FAILED} ack first and a dead letter at its second try; one refused in a statement
 * shared with other messages has had both tries in that delivery and is dead-lettered at once), whose backends the
 * test also terminates now and then.
 *
 * <p>Every insert into Queen's dead-letter table sleeps 100 ms (a trigger), which widens the window between the
 * target transaction that decides a dead letter (and records it in {@code queen.sink_dead_letters}) and Queen's
 * transaction that records it. Eight kills: the odd ones 1 to 3 s into a child's life, the even ones at the first
 * moment after that when a dead letter's insert is seen sleeping in {@code pg_stat_activity}, so the target has
 * committed it and Queen has not. After each kill the test logs how many dead letters were decided in the target but
 * not recorded in Queen, and at least one kill must have left some.
 *
 * <p>At the end, for each sink: every good message is in its table exactly once (at its own partition and offset);
 * every poison message is in Queen's dead-letter queue for the sink's group {@code pg-<name>} exactly once, with
 * the sink's error after exactly {@code maxAttempts} attempts, and no other message and no other group is
 * dead-lettered; {@code queen.sink_dead_letters} holds exactly the poison messages' (partition, offset), once each;
 * the group's lag is 0, its cursors count no attempt, and every progress row sits at its partition's last offset.
 */
@QueenPostgres
@Slow
class SinkDeadLetterCrashIT {
  private static final Logger LOG = LoggerFactory.getLogger(SinkDeadLetterCrashIT.class);
  private static final String Q = "items";
  private static final int PARTITIONS = 20;
  /** The pusher stops at the end of the kills, or here. */
  private static final int MAX_MESSAGES = 10_000;
  private static final int KILLS = 8;
  private static final List<SinkDef> SINKS = List.of(new SinkDef("one", "dl_one", 1, false),
      new SinkDef("two", "dl_two", 2, true));

  /** A sink of this test: its name, its table, its maxAttempts, and whether it has a connection of its own. */
  private record SinkDef(String name, String table, int maxAttempts, boolean ownConnection) {
    String group() {
      return "pg-" + name;
    }

    String document(TestDatabase db) {
      String connection = !ownConnection ? "" : """
          "connection": {"host": "%s", "port": %d, "database": "%s", "user": "%s", "password": "%s"},
          """.formatted(db.host(), db.port(), db.name(), db.user(), db.password());
      return """
          {"kind": "sink", %s
           "sink": {"queue": "%s", "table": "%s", "mode": "append", "workers": 2, "batchSize": 50, "maxAttempts": %d,
                    "metadata": {"partition": "part", "offset": "off"}}}"""
          .formatted(connection, Q, table, maxAttempts);
    }
  }

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

  /** How many lines of all the children's logs contain every one of {@code parts}. */
  private long logLines(String... parts) {
    long n = 0;
    for (ChildJvm c : children) {
      for (String line : c.lines()) {
        boolean all = true;
        for (String p : parts) {
          all &= line.contains(p);
        }
        n += all ? 1 : 0;
      }
    }
    return n;
  }

  /** Dead letters the sink decided in the target that Queen has not recorded (yet), in one snapshot. */
  private static long unrecorded(TestDatabase db, SinkDef sink) throws SQLException {
    return count(db, "select (select count(*) from queen.sink_dead_letters where sink = ?)"
        + " - (select count(*) from queen.dead_letters where group_name = ?)", sink.name(), sink.group());
  }

  @Test
  @Timeout(value = 150, unit = TimeUnit.SECONDS)
  void sinkNodesKilledAmongPoisonMessagesApplyEveryGoodMessageOnceAndDeadLetterEveryPoisonOnce(TestDatabase db,
      DataSource ds) throws Exception {
    long t0 = System.nanoTime();
    long seed = System.nanoTime();
    Random random = new Random(seed);
    LOG.info("seed {}", seed);
    for (SinkDef s : SINKS) {
      sql(db, "create table " + s.table() + " (id bigint not null, qty int not null constraint " + s.table()
          + "_qty_positive check (qty > 0), part text not null, off bigint not null)");
    }
    // a killed client's backend notices at once even mid-statement (as a TCP reset would make it)
    sql(db, "alter database \"" + db.name() + "\" set client_connection_check_interval = '200ms'");
    try (Queen observer = EmbeddedQueen.builder().dataSource(ds).nodeId("observer").encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      // the window between a dead letter's commit in the target and its record in Queen: 100 ms per dead letter
      sql(db, "create function slow_dead_letter() returns trigger language plpgsql as $$ begin perform pg_sleep(0.1);"
          + " return new; end $$", "create trigger slow_dead_letter before insert on queen.dead_letters for each row"
          + " execute function slow_dead_letter()");
      observer.queue(Q).configure(c -> c); // the defaults: retryDelay 0, lease 30 s
      for (SinkDef s : SINKS) {
        observer.connectors().put(s.name(), s.document(db));
      }
      Pusher pusher = new Pusher(observer, new Random(seed + 1));
      int terminated = 0;
      long unrecordedAtKills = 0;
      int killsWithUnrecorded = 0;
      try {
        for (int k = 1; k <= KILLS; k++) {
          ChildJvm victim = child(db);
          String node = victim.awaitLine(l -> l.startsWith("READY "), Duration.ofSeconds(60)).substring(6).trim();
          for (SinkDef s : SINKS) {
            victim.awaitLine(l -> l.startsWith("STATUS " + s.name() + " running "), Duration.ofSeconds(30));
          }
          long life = 1_000 + random.nextInt(2_000);
          if (k % 3 == 2) {
            // sink two's backends on its own connection terminated under it: transient, retried, never an attempt
            long before = 300 + random.nextInt(500);
            Thread.sleep(before);
            life -= before;
            terminated += terminateBackends(db, "queen-sink-two");
          }
          Thread.sleep(life);
          boolean targeted = k % 2 == 0;
          if (targeted) {
            // a dead letter's insert sleeping in the trigger: the target has committed the dead letter, Queen has not
            // (no new poison comes once the pusher has reached its maximum)
            try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement("select exists (select 1"
                + " from pg_stat_activity where datname = current_database() and wait_event = 'PgSleep')")) {
              within(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(5)).until(() -> {
                try (ResultSet rs = st.executeQuery()) {
                  rs.next();
                  return rs.getBoolean(1) || pusher.done();
                }
              });
            }
          }
          victim.kill();
          assertThat(victim.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
          long u1 = unrecorded(db, SINKS.get(0));
          long u2 = unrecorded(db, SINKS.get(1));
          unrecordedAtKills += u1 + u2;
          killsWithUnrecorded += u1 + u2 > 0 ? 1 : 0;
          LOG.info("kill {} ({}): node {} killed; dead letters decided in the target but not recorded in Queen: one {},"
              + " two {}; pushed so far {}", k, targeted ? "while a dead letter was being recorded" : "at random", node,
              u1, u2, pusher.pushed());
        }
        child(db).awaitLine(l -> l.startsWith("READY "), Duration.ofSeconds(60));
      } finally {
        pusher.close();
      }
      assertThat(killsWithUnrecorded).as("kills between a dead letter's commit in the target and its record in Queen")
          .isPositive();
      within(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
          .until(() -> SINKS.stream().allMatch(s -> lag(observer, Q, s.group()) == 0));

      // ---- every row, every dead letter exact
      Map<Long, String> good = new HashMap<>(pusher.at);
      good.keySet().removeAll(pusher.poison);
      Map<Long, String> poison = new HashMap<>(pusher.at);
      poison.keySet().retainAll(pusher.poison);
      assertThat(pusher.pushed()).isGreaterThanOrEqualTo(2_000);
      assertThat(poison).isNotEmpty();
      assertThat(count(db, "select count(*) from queen.dead_letters")).as("no group but the sinks' dead-letters")
          .isEqualTo(count(db, "select count(*) from queen.dead_letters where group_name in ('pg-one', 'pg-two')"));
      for (SinkDef s : SINKS) {
        assertRows(db, s.table(), good);
        assertDeadLetters(observer, db, s, poison);
        assertThat(count(db, "select coalesce(max(attempts), 0) from queen.cursors where group_name = ?", s.group()))
            .as("no attempt left on the cursors of %s", s.group()).isZero();
        assertThat(count(db, "select count(*) from queen.partitions p join queen.queues q on q.id = p.queue_id"
            + " left join queen.sink_progress sp on sp.partition_id = p.id and sp.sink = ?"
            + " where q.name = ? and coalesce(sp.last_offset, -1) <> p.next_offset - 1", s.name(), Q))
            .as("every progress row of %s at its partition's last offset", s.name()).isZero();
      }

      StringBuilder counters = new StringBuilder();
      for (SinkDef s : SINKS) {
        long[] sum = new long[5];
        for (ChildJvm c : children) {
          long[] st = lastStatus(c, s.name());
          for (int i = 0; i < 5; i++) {
            sum[i] += st[i];
          }
        }
        counters.append(String.format(" %s: applied %d, skipped %d, dlq %d, batches %d, errors %d; refusals that"
            + " dead-lettered %d;", s.name(), sum[0], sum[1], sum[2], sum[3], sum[4],
            logLines("sink '" + s.name() + "': partition", "dead-lettered")));
      }
      LOG.info("SinkDeadLetterCrashIT: {} messages pushed over {} partitions, {} poison; {} kills, {} of them with dead"
          + " letters decided in the target but not in Queen ({} in all); {} backend(s) of sink two terminated;"
          + " sink two's first refusals {}; each good message once in each table, each poison once in each group's"
          + " dead letters and in queen.sink_dead_letters; counters of the children as last printed:{} {} s",
          pusher.pushed(), PARTITIONS, poison.size(), KILLS, killsWithUnrecorded, unrecordedAtKills, terminated,
          logLines("sink 'two': partition", "(attempt 1 of 2)"), counters, (System.nanoTime() - t0) / 1_000_000_000);
    }
  }

  /** Every good message in {@code table} exactly once, at its partition and offset; nothing else. */
  private static void assertRows(TestDatabase db, String table, Map<Long, String> good) throws SQLException {
    Map<Long, Integer> rows = new HashMap<>();
    Map<Long, String> at = new HashMap<>();
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement("select id, part || '/' || off"
        + " from " + table); ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        rows.merge(rs.getLong(1), 1, Integer::sum);
        at.put(rs.getLong(1), rs.getString(2));
      }
    }
    assertThat(notOnce(rows)).as("rows of %s written other than once", table).isEmpty();
    assertThat(rows.keySet()).as("%s: one row per good message, none lost, no poison", table)
        .isEqualTo(good.keySet());
    assertThat(at).as("%s: each row at its message's partition and offset", table).isEqualTo(good);
  }

  /**
   * Every poison message exactly once in Queen's dead letters of the sink's group (with the sink's error after
   * {@code maxAttempts} attempts) and in {@code queen.sink_dead_letters}; nothing else in either.
   */
  private static void assertDeadLetters(Queen observer, TestDatabase db, SinkDef sink, Map<Long, String> poison)
      throws SQLException {
    Map<Long, Integer> dead = new HashMap<>();
    Map<Long, String> at = new HashMap<>();
    Long after = null;
    for (List<DeadLetter> page; !(page = observer.deadLetters(Q).group(sink.group()).list(1000, after)).isEmpty(); ) {
      for (DeadLetter d : page) {
        long id = d.payload().get("id").asLong();
        dead.merge(id, 1, Integer::sum);
        at.put(id, d.partition() + "/" + d.offset());
        assertThat(d.error()).startsWith("sink '" + sink.name() + "' gave up after " + sink.maxAttempts()
            + " attempt(s): ").contains(sink.table() + "_qty_positive");
      }
      after = page.get(page.size() - 1).id();
    }
    assertThat(notOnce(dead)).as("dead letters of %s recorded other than once", sink.group()).isEmpty();
    assertThat(at).as("dead letters of %s: exactly the poison messages, at their partition and offset", sink.group())
        .isEqualTo(poison);
    assertThat(observer.deadLetters(Q).group(sink.group()).count()).isEqualTo(poison.size());

    Map<String, Integer> marked = new HashMap<>();
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement("select p.name || '/' ||"
        + " d.\"offset\" from queen.sink_dead_letters d left join queen.partitions p on p.id = d.partition_id"
        + " where d.sink = ?")) {
      st.setString(1, sink.name());
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          marked.merge(rs.getString(1), 1, Integer::sum);
        }
      }
    }
    assertThat(notOnce(marked)).as("queen.sink_dead_letters of %s: each once", sink.name()).isEmpty();
    assertThat(marked.keySet()).as("queen.sink_dead_letters of %s: exactly the poison messages", sink.name())
        .isEqualTo(Set.copyOf(poison.values()));
  }

  private static <K> Map<K, Integer> notOnce(Map<K, Integer> counts) {
    Map<K, Integer> out = new TreeMap<>();
    counts.forEach((k, n) -> {
      if (n != 1) {
        out.put(k, n);
      }
    });
    return out;
  }

  /**
   * Pushes messages {@code {"id", "qty"}} (ids 1, 2, ...; about 3 % with {@code qty} -1, the rest 1..1000) from its
   * own thread, 20 per transaction to random partitions, one transaction every ~80 ms, until closed (or
   * {@value #MAX_MESSAGES} are pushed); remembers where each landed ({@code partition/offset}). A push that fails
   * stops it and fails the test.
   */
  private static final class Pusher implements AutoCloseable {
    private final Queen queen;
    private final Random random;
    final Map<Long, String> at = new ConcurrentHashMap<>();
    final Set<Long> poison = ConcurrentHashMap.newKeySet();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private volatile boolean running = true;
    private final Thread thread;
    private long next = 1;

    Pusher(Queen queen, Random random) {
      this.queen = queen;
      this.random = random;
      this.thread = new Thread(this::run, "test-pusher");
      thread.setDaemon(true);
      thread.start();
    }

    private void run() {
      while (running && next <= MAX_MESSAGES) {
        try {
          pushRound(20);
          Thread.sleep(80);
        } catch (InterruptedException e) {
          return;
        } catch (Throwable t) {
          failure.set(t);
          return;
        }
      }
    }

    private void pushRound(int n) {
      List<PushItem> items = new ArrayList<>();
      List<Long> ids = new ArrayList<>();
      List<Boolean> bad = new ArrayList<>();
      for (int i = 0; i < n && next <= MAX_MESSAGES; i++) {
        long id = next++;
        boolean isPoison = random.nextInt(100) < 3;
        items.add(PushItem.of("p" + random.nextInt(PARTITIONS), Map.of("id", id, "qty",
            isPoison ? -1 : 1 + random.nextInt(1000))));
        ids.add(id);
        bad.add(isPoison);
      }
      List<PushResult> res = queen.queue(Q).push(items);
      assertThat(res).hasSize(items.size());
      for (int i = 0; i < items.size(); i++) {
        assertThat(res.get(i).isDuplicate()).isFalse();
        if (bad.get(i)) {
          poison.add(ids.get(i));
        }
        at.put(ids.get(i), res.get(i).partition() + "/" + res.get(i).offset());
      }
    }

    long pushed() {
      return at.size();
    }

    boolean done() {
      return !thread.isAlive();
    }

    @Override
    public void close() throws InterruptedException {
      running = false; // not interrupted: a push cut by an interrupt would look like a failure
      thread.join(10_000);
      if (failure.get() != null) {
        throw new AssertionError("the pusher failed", failure.get());
      }
    }
  }
}
