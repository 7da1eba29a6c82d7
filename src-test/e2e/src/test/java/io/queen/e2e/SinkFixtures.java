package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.testkit.TestDatabase;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/** What the sink fault tests share: the key, the tables, a pusher that knows what every account must hold. */
final class SinkFixtures {
  /** The line a {@link SinkChild} prints every 100 ms per connector. */
  static final java.util.regex.Pattern STATUS = java.util.regex.Pattern.compile("STATUS (\\S+) (\\S+)"
      + " applied=(\\d+) skipped=(\\d+) dlq=(\\d+) batches=(\\d+) errors=(\\d+)");

  /** A sink node in a JVM of its own ({@link SinkChild}) on {@code db}. */
  static io.queen.testkit.ChildJvm sinkChild(TestDatabase db) {
    return io.queen.testkit.ChildJvm.builder(SinkChild.class).jvmOptions("-Xmx256m", "-XX:TieredStopAtLevel=1")
        .args(db.jdbcUrl(), db.user(), db.password()).start();
  }

  /** The last STATUS counters a child printed for one connector: {applied, skipped, dlq, batches, errors}. */
  static long[] lastStatus(io.queen.testkit.ChildJvm c, String connector) {
    long[] out = new long[5];
    for (String line : c.lines()) {
      java.util.regex.Matcher m = STATUS.matcher(line);
      if (m.find() && m.group(1).equals(connector)) {
        for (int i = 0; i < 5; i++) {
          out[i] = Long.parseLong(m.group(3 + i));
        }
      }
    }
    return out;
  }

  static final String KEY = "5a".repeat(32);

  private SinkFixtures() {}

  static void sql(TestDatabase db, String... statements) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  static long count(TestDatabase db, String query, Object... params) throws SQLException {
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement(query)) {
      for (int i = 0; i < params.length; i++) {
        st.setObject(i + 1, params[i]);
      }
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  /** {@code accounts} with ids 1..n at balance 0, and the {@code ledger} an append sink writes. */
  static void createTables(TestDatabase db, int accounts) throws SQLException {
    sql(db, "create table accounts(id bigint primary key, balance numeric not null)",
        "insert into accounts select g, 0 from generate_series(1, " + accounts + ") g",
        "create table ledger(seq bigint not null, \"accountId\" bigint not null, amount numeric not null,"
            + " part text not null, off bigint not null)");
  }

  /** The payments sink of the queen-pgconn README, its statement verbatim, through its own connection (application_name queen-sink-NAME). */
  static String paymentsSink(TestDatabase db, String queue, int workers, int batch) {
    return """
        {"kind": "sink",
         "connection": {"host": "%s", "port": %d, "database": "%s", "user": "%s", "password": "%s"},
         "sink": {"queue": "%s", "mode": "sql", "workers": %d, "batchSize": %d,
                  "statement": "UPDATE accounts SET balance = balance + $1::numeric WHERE id = $2::bigint",
                  "params": ["$.amount", "$.accountId"]}}""".formatted(db.host(), db.port(), db.name(), db.user(),
        db.password(), queue, workers, batch);
  }

  /** An append sink into {@code ledger} through Queen's own DataSource: one row per application, no key to hide a double. */
  static String ledgerSink(String queue, int workers, int batch) {
    return """
        {"kind": "sink",
         "sink": {"queue": "%s", "table": "ledger", "mode": "append", "workers": %d, "batchSize": %d,
                  "metadata": {"partition": "part", "offset": "off"}}}""".formatted(queue, workers, batch);
  }

  /** Every balance equals exactly one application of each pushed message. */
  static void assertBalances(TestDatabase db, Pusher p) throws SQLException {
    Map<Long, BigDecimal> actual = new TreeMap<>();
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select id, balance from accounts")) {
      while (rs.next()) {
        actual.put(rs.getLong(1), rs.getBigDecimal(2));
      }
    }
    Map<Long, BigDecimal> expected = p.expected();
    assertThat(actual.keySet()).containsAll(expected.keySet());
    for (var e : actual.entrySet()) {
      BigDecimal want = expected.getOrDefault(e.getKey(), BigDecimal.ZERO);
      assertThat(e.getValue()).as("balance of account %d", e.getKey()).isEqualByComparingTo(want);
    }
  }

  /** Every pushed message is in {@code ledger} exactly once, with its amount, and nothing else is. */
  static void assertLedger(TestDatabase db, Pusher p) throws SQLException {
    Map<Long, Integer> rows = new HashMap<>();
    Map<Long, BigDecimal> amounts = new HashMap<>();
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select seq, amount from ledger")) {
      while (rs.next()) {
        rows.merge(rs.getLong(1), 1, Integer::sum);
        amounts.put(rs.getLong(1), rs.getBigDecimal(2));
      }
    }
    Map<Long, Integer> notOnce = new TreeMap<>();
    rows.forEach((seq, n) -> {
      if (n != 1) {
        notOnce.put(seq, n);
      }
    });
    assertThat(notOnce).as("ledger rows written other than once").isEmpty();
    assertThat(rows.keySet()).as("one ledger row per pushed message, none lost, none invented").isEqualTo(p.seqs());
    p.amounts.forEach((seq, amount) -> assertThat(amounts.get(seq)).isEqualByComparingTo(amount));
  }

  /**
   * Pushes {@code {"seq", "accountId", "amount"}} messages continuously (a few per transaction, to random
   * partitions) from its own thread until stopped; remembers what it pushed. A push that fails stops it and
   * fails the test.
   */
  static final class Pusher implements AutoCloseable {
    private final Queen queen;
    private final String queue;
    private volatile int partitions;
    private final int accounts;
    private volatile long pauseMillis;
    private final Random random = new Random(42);
    private final AtomicLong seq = new AtomicLong();
    final Map<Long, BigDecimal> amounts = new ConcurrentHashMap<>();
    private final Map<Long, Long> accountOf = new ConcurrentHashMap<>();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private volatile boolean running = true;
    private final Thread thread;

    Pusher(Queen queen, String queue, int partitions, int accounts, long pauseMillis) {
      this.queen = queen;
      this.queue = queue;
      this.partitions = partitions;
      this.accounts = accounts;
      this.pauseMillis = pauseMillis;
      this.thread = new Thread(this::run, "test-pusher");
      thread.setDaemon(true);
      thread.start();
    }

    private void run() {
      while (running) {
        try {
          pushRound(5);
          Thread.sleep(pauseMillis);
        } catch (InterruptedException e) {
          return;
        } catch (Throwable t) {
          failure.set(t);
          return;
        }
      }
    }

    /** One transaction of {@code n} messages (also callable from the test thread while the pusher is stopped). */
    synchronized void pushRound(int n) {
      List<PushItem> items = new ArrayList<>();
      List<long[]> meta = new ArrayList<>();
      List<BigDecimal> amt = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        long s = seq.incrementAndGet();
        long account = 1 + random.nextInt(accounts);
        BigDecimal amount = BigDecimal.valueOf(random.nextInt(100_000) - 20_000, 2);
        String partition = partitions == 1 ? "only" : "p" + random.nextInt(partitions);
        items.add(PushItem.of(partition, Map.of("seq", s, "accountId", account, "amount", amount.toPlainString())));
        meta.add(new long[] {s, account});
        amt.add(amount);
      }
      List<PushResult> res = queen.queue(queue).push(items);
      assertThat(res).hasSize(n);
      for (int i = 0; i < n; i++) {
        amounts.put(meta.get(i)[0], amt.get(i));
        accountOf.put(meta.get(i)[0], meta.get(i)[1]);
      }
    }

    /** Push to partitions p0 .. p(n-1) from now on. */
    void spread(int n) {
      partitions = n;
    }

    /** The pause between two pushes from now on. */
    void pause(long millis) {
      pauseMillis = millis;
    }

    long pushed() {
      return amounts.size();
    }

    Set<Long> seqs() {
      return Set.copyOf(amounts.keySet());
    }

    Map<Long, BigDecimal> expected() {
      Map<Long, BigDecimal> sums = new TreeMap<>();
      amounts.forEach((s, a) -> sums.merge(accountOf.get(s), a, BigDecimal::add));
      return sums;
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
