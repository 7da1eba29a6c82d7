package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.EmbeddedQueen;
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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A consumer JVM holding leases over many partitions is SIGKILLed with a lease time of 30 s and a
 * session timeout of 4 s; the surviving node delivers every one of those partitions again within about the
 * session timeout, not the lease. At the end every message was handled, none lost, and per partition each
 * process handled its messages in offset order. Prints {@code FIGURE crash_recovery_s <s> s}: from the kill
 * to the survivor's first delivery on the last of the dead node's partitions.
 */
@QueenPostgres
@Slow
class SessionTimeoutIT {
  private static final Logger LOG = LoggerFactory.getLogger(SessionTimeoutIT.class);
  private static final Duration LEASE = Duration.ofSeconds(30);
  private static final Duration SESSION = Duration.ofSeconds(4);
  private static final int SURVIVOR_PID = 0;

  private Queen survivor;
  private TestDatabase db;
  private final List<ChildJvm> children = new ArrayList<>();

  @BeforeEach
  void start(TestDatabase db, DataSource ds) throws SQLException {
    this.db = db;
    survivor = EmbeddedQueen.builder().dataSource(ds).nodeId("survivor").start();
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists handled(id bigserial primary key, message_id uuid not null, n int not null,"
          + " pid int not null, attempt int not null, partition_name text not null, msg_offset bigint not null)");
      st.execute("truncate handled");
    }
  }

  @AfterEach
  void stop() {
    children.forEach(ChildJvm::close);
    survivor.close();
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void aKilledNodesPartitionsComeBackWithinTheSessionTimeoutNotTheLease() throws Exception {
    String q = "liveness";
    int partitions = 40;
    int perPartition = 5;
    survivor.queue(q).configure(c -> c.leaseTime(LEASE).retryLimit(10));
    Set<UUID> pushed = new HashSet<>();
    pushed.addAll(push(q, partitions, perPartition, 0));

    // the child's ten workers each hold one partition (5 messages each, 100 ms a message): about 10 partitions at once
    ChildJvm child = ChildJvm.builder(SessionChild.class)
        .args(db.jdbcUrl(), db.user(), db.password(), q, "doomed-1", String.valueOf(SESSION.toMillis()), "50", "10", "10", "100")
        .jvmOptions("-Xmx128m", "-XX:TieredStopAtLevel=1")
        .echoTo(System.out)
        .start();
    children.add(child);
    child.awaitLine(l -> l.startsWith("HANDLED 6 "), Duration.ofSeconds(60));

    // the survivor consumes the same queue, recording when it first sees each partition after the kill
    AtomicLong killedAt = new AtomicLong();
    Map<String, Long> firstAfterKill = new ConcurrentHashMap<>();
    {
      Subscription s = survivor.queue(q).consumer().batch(50).concurrency(16).consume(m -> {
        long k = killedAt.get();
        if (k != 0) {
          firstAfterKill.putIfAbsent(m.partition(), System.nanoTime());
        }
        record(m);
      });
      within(Duration.ofSeconds(30)).until(() -> leasedBy("doomed-1").size() >= 10);
      Set<String> dead = leasedBy("doomed-1");
      killedAt.set(System.nanoTime());
      child.kill();
      assertThat(child.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
      LOG.info("killed the child holding {} partition(s): {}", dead.size(), dead);
      pushed.addAll(push(q, partitions, perPartition, perPartition)); // new jobs routed to its partitions too

      within(Duration.ofSeconds(25)).until(() -> firstAfterKill.keySet().containsAll(dead));
      long last = dead.stream().mapToLong(firstAfterKill::get).max().orElseThrow();
      double recovery = (last - killedAt.get()) / 1e9;
      System.out.printf("FIGURE crash_recovery_s %.2f s%n", recovery);
      LOG.info("the survivor had every one of the {} partition(s) of the killed node back after {} s (session timeout {},"
          + " lease {})", dead.size(), recovery, SESSION, LEASE);
      // the claim is "the session timeout, not the lease": 4 s plus a margin for a loaded 2-core machine running two
      // test JVMs (it read 6.8 s once), well under the 30 s lease
      assertThat(recovery).as("within the session timeout plus a margin, not the lease time")
          .isLessThan(SESSION.toMillis() / 1000.0 + 6.0);

      within(Duration.ofSeconds(60)).until(() -> lag(survivor, q, Queen.DEFAULT_GROUP) == 0);
      s.close();
    }

    List<Row> rows = handledRows();
    Map<UUID, List<Row>> byId = new LinkedHashMap<>();
    rows.forEach(r -> byId.computeIfAbsent(r.id, x -> new ArrayList<>()).add(r));
    assertThat(byId.keySet()).as("every message handled: nothing lost, nothing invented").isEqualTo(pushed);
    // in flight at the kill: per worker of the child (10), the partition it was handling and one whose ack was
    // still committing; a partition held at most 2 x perPartition messages
    assertThat(rows.size() - byId.size()).as("only what was in flight at the kill is handled twice")
        .isLessThanOrEqualTo(10 * 2 * (2 * perPartition));
    Map<String, Map<Integer, Long>> lastOffset = new LinkedHashMap<>();
    for (Row r : rows) {
      Long before = lastOffset.computeIfAbsent(r.partition, x -> new LinkedHashMap<>()).put(r.pid, r.offset);
      assertThat(before == null || r.offset > before)
          .as("partition %s: process %d handled offset %d after %d", r.partition, r.pid, r.offset, before).isTrue();
    }
    for (Row r : rows) {
      if (byId.get(r.id).size() > 1) {
        assertThat(byId.get(r.id)).as("a message handled twice was first handled by the killed child")
            .first().satisfies(first -> assertThat(first.pid).isNotEqualTo(SURVIVOR_PID));
      }
    }
    assertThat(survivor.deadLetters(q).defaultGroup().count()).isZero();
  }

  private List<UUID> push(String q, int partitions, int perPartition, int from) {
    List<PushItem> items = new ArrayList<>();
    for (int i = from; i < from + perPartition; i++) {
      for (int p = 0; p < partitions; p++) {
        items.add(PushItem.of("p" + p, Map.of("n", p * 1000 + i)));
      }
    }
    return survivor.queue(q).push(items).stream().map(PushResult::messageId).toList();
  }

  private void record(Message m) throws SQLException {
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement(
        "insert into handled(message_id, n, pid, attempt, partition_name, msg_offset) values (?, ?, ?, ?, ?, ?)")) {
      st.setObject(1, m.id());
      st.setInt(2, m.payload().path("n").asInt(-1));
      st.setInt(3, SURVIVOR_PID);
      st.setInt(4, m.attempt());
      st.setString(5, m.partition());
      st.setLong(6, m.offset());
      st.executeUpdate();
    }
  }

  /** Partitions whose live-looking lease names the node. */
  private Set<String> leasedBy(String node) throws SQLException {
    Set<String> out = new HashSet<>();
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement("select p.name from queen.cursors cu"
        + " join queen.partitions p on p.id = cu.partition_id where cu.lease_owner = ? and cu.lease_expires_at > now()")) {
      st.setString(1, node);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getString(1));
        }
      }
    }
    return out;
  }

  private record Row(long seq, UUID id, int pid, int attempt, String partition, long offset) {}

  private List<Row> handledRows() throws SQLException {
    List<Row> rows = new ArrayList<>();
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select id, message_id, pid, attempt, partition_name, msg_offset from handled"
            + " order by id")) {
      while (rs.next()) {
        rows.add(new Row(rs.getLong(1), rs.getObject(2, UUID.class), rs.getInt(3), rs.getInt(4), rs.getString(5),
            rs.getLong(6)));
      }
    }
    return rows;
  }
}
