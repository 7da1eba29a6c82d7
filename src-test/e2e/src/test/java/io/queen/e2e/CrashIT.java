package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.DeadLetter;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.ChildJvm;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.Slow;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumers in separate JVMs ({@link ConsumerChild}) killed with SIGKILL in the middle of a batch: after
 * the lease expires the messages are redelivered with the attempt counted, nothing is lost, and only the
 * messages in flight at a kill are handled twice. A message that kills its consumer every time ends in
 * the dead-letter queue after the retry limit, and the partition carries on.
 */
@QueenPostgres
@Slow
class CrashIT {
  private static final Logger LOG = LoggerFactory.getLogger(CrashIT.class);
  private static final Duration LEASE = Duration.ofSeconds(1);

  private Queen observer;
  private TestDatabase db;
  private final List<ChildJvm> children = new ArrayList<>();

  @BeforeEach
  void start(TestDatabase db, DataSource ds) throws SQLException {
    this.db = db;
    observer = EmbeddedQueen.builder().dataSource(ds).nodeId("observer").start();
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists handled(id bigserial primary key, message_id uuid not null, n int not null,"
          + " pid int not null, attempt int not null, partition_name text not null, msg_offset bigint not null)");
      st.execute("truncate handled");
    }
  }

  @AfterEach
  void stop() {
    children.forEach(ChildJvm::close);
    observer.close();
  }

  private ChildJvm child(String queue, int batch, int concurrency, int sleepMillis) {
    ChildJvm c = ChildJvm.builder(ConsumerChild.class)
        .args(db.jdbcUrl(), db.user(), db.password(), queue, String.valueOf(batch), String.valueOf(concurrency),
            String.valueOf(sleepMillis))
        .jvmOptions("-Xmx128m", "-XX:TieredStopAtLevel=1")
        .echoTo(System.out)
        .start();
    children.add(c);
    return c;
  }

  @Test
  @Timeout(value = 150, unit = TimeUnit.SECONDS)
  void consumerKilledMidBatchLosesNothingAndDuplicatesOnlyWhatWasInFlight() throws Exception {
    String q = "crash";
    int messages = 600;
    int partitions = 4;
    int kills = 4;
    int batch = 10;
    int concurrency = 2;
    // leases expire fast; retries are plenty so the kills alone never dead-letter anything
    observer.queue(q).configure(c -> c.leaseTime(LEASE).retryLimit(10));
    Set<UUID> pushed = new HashSet<>();
    List<PushItem> items = new ArrayList<>();
    for (int i = 0; i < messages; i++) {
      items.add(PushItem.of("p" + (i % partitions), Map.of("n", i)));
    }
    for (PushResult r : observer.queue(q).push(items)) {
      pushed.add(r.messageId());
    }

    Set<Integer> killed = new HashSet<>();
    for (int k = 1; k <= kills; k++) {
      ChildJvm c = child(q, batch, concurrency, 10);
      c.awaitLine(l -> l.startsWith("HANDLED 40 "), Duration.ofSeconds(60));
      c.kill();
      assertThat(c.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
      killed.add((int) c.pid());
      LOG.info("kill {}: child {} killed; lag now {}", k, c.pid(), lag(observer, q, Queen.DEFAULT_GROUP));
    }
    ChildJvm last = child(q, batch, concurrency, 10);
    within(Duration.ofSeconds(60)).until(() -> lag(observer, q, Queen.DEFAULT_GROUP) == 0);
    within(Duration.ofSeconds(10)).until(() -> E2e.leases(observer, q, Queen.DEFAULT_GROUP) == 0);
    last.kill();
    last.awaitExit(Duration.ofSeconds(30));

    List<Row> rows = handledRows();
    Map<UUID, List<Row>> byId = new LinkedHashMap<>();
    rows.forEach(r -> byId.computeIfAbsent(r.id, x -> new ArrayList<>()).add(r));
    LOG.info("handled rows {}, distinct {}, by {} children", rows.size(), byId.size(),
        rows.stream().map(r -> r.pid).distinct().count());

    assertThat(byId.keySet()).as("handled ids == pushed ids: nothing lost, nothing invented").isEqualTo(pushed);
    int extra = rows.size() - byId.size();
    // What a kill can cut short, per worker: the unit it is handling and the unit whose acknowledgement is still
    // committing (a worker does not wait for it); a unit is one partition's messages from a pop that took up to
    // one partition per idle worker, so at most concurrency x batch messages.
    int inFlightPerKill = concurrency * 2 * (concurrency * batch);
    assertThat(extra).as("duplicates are bounded by kills x what one node can have in flight")
        .isLessThanOrEqualTo(kills * inFlightPerKill);
    for (Map.Entry<UUID, List<Row>> e : byId.entrySet()) {
      List<Row> hs = e.getValue();
      for (Row earlier : hs.subList(0, hs.size() - 1)) {
        assertThat(killed).as("message %s was handled again, so an earlier handling must be by a killed child", e.getKey())
            .contains(earlier.pid);
      }
    }
    assertThat(rows).as("every killed child handled something").extracting(r -> r.pid).containsAll(killed);
    assertThat(rows).as("redeliveries after an expired lease carry the counted attempt")
        .anySatisfy(r -> assertThat(r.attempt).isGreaterThan(1));
    assertThat(rows).allSatisfy(r -> assertThat(r.attempt).isLessThanOrEqualTo(kills + 1));
    // per partition, the final handling of each offset happened in offset order
    Map<String, Long> lastOffset = new HashMap<>();
    for (Row r : rows) {
      lastOffset.merge(r.partition, r.offset, Math::max);
    }
    assertThat(lastOffset.values()).containsOnly((long) messages / partitions - 1);
    assertThat(lag(observer, q, Queen.DEFAULT_GROUP)).isZero();
    assertThat(observer.deadLetters(q).defaultGroup().count()).isZero();
  }

  @Test
  @Timeout(value = 150, unit = TimeUnit.SECONDS)
  void messageThatKillsItsConsumerEveryTimeEndsInTheDeadLetterQueue() throws Exception {
    String q = "poison";
    int retryLimit = 2;
    observer.queue(q).configure(c -> c.leaseTime(LEASE).retryLimit(retryLimit));
    List<PushItem> items = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      items.add(PushItem.of("p", i == 1 ? Map.of("n", i, "poison", true) : Map.of("n", i)));
    }
    List<PushResult> rs = observer.queue(q).push(items);
    UUID poison = rs.get(1).messageId();

    int crashes = 0;
    for (int round = 0; round < 10 && lag(observer, q, Queen.DEFAULT_GROUP) != 0; round++) {
      ChildJvm c = child(q, 3, 1, 5);
      within(Duration.ofSeconds(30)).until(() -> !c.isAlive() || lag(observer, q, Queen.DEFAULT_GROUP) == 0);
      if (!c.isAlive()) {
        assertThat(c.awaitExit(Duration.ofSeconds(5))).as("the poison halts the child").isEqualTo(1);
        crashes++;
        LOG.info("crash {}: child {} halted on the poison", crashes, c.pid());
      }
    }
    assertThat(lag(observer, q, Queen.DEFAULT_GROUP)).as("the partition carried on to its end").isZero();

    List<DeadLetter> dead = observer.deadLetters(q).defaultGroup().list(10, null);
    assertThat(dead).hasSize(1);
    DeadLetter d = dead.get(0);
    assertThat(d.messageId()).isEqualTo(poison);
    assertThat(d.offset()).isEqualTo(1);
    assertThat(d.attempts()).as("retryLimit %d: the first delivery and %d retries", retryLimit, retryLimit)
        .isEqualTo(retryLimit + 1);
    assertThat(d.error()).contains("lease expired");

    List<Row> rows = handledRows();
    List<Row> poisonRows = rows.stream().filter(r -> r.id.equals(poison)).toList();
    assertThat(poisonRows).hasSize(crashes);
    assertThat(poisonRows.subList(poisonRows.size() - (retryLimit + 1), poisonRows.size()))
        .as("as the head of its partition the poison was delivered with attempts 1, 2, 3")
        .extracting(r -> r.attempt).containsExactly(1, 2, 3);
    Set<UUID> others = new HashSet<>();
    rs.stream().filter(r -> !r.messageId().equals(poison)).forEach(r -> others.add(r.messageId()));
    assertThat(rows.stream().map(r -> r.id).filter(id -> !id.equals(poison)).distinct().toList())
        .containsExactlyInAnyOrderElementsOf(others);
    long lastPoisonRow = poisonRows.get(poisonRows.size() - 1).seq;
    assertThat(rows.stream().filter(r -> r.offset > 1 && r.seq > lastPoisonRow).map(r -> r.offset).distinct().sorted())
        .as("the messages after the poison were handled after it was dead-lettered, in order")
        .containsExactly(2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L);
  }

  private record Row(long seq, UUID id, int n, int pid, int attempt, String partition, long offset) {}

  private List<Row> handledRows() throws SQLException {
    List<Row> rows = new ArrayList<>();
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select id, message_id, n, pid, attempt, partition_name, msg_offset from handled"
            + " order by id")) {
      while (rs.next()) {
        rows.add(new Row(rs.getLong(1), rs.getObject(2, UUID.class), rs.getInt(3), rs.getInt(4), rs.getInt(5),
            rs.getString(6), rs.getLong(7)));
      }
    }
    return rows;
  }
}
