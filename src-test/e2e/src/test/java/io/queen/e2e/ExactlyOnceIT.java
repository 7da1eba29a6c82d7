package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.leases;
import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
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
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Exactly-once effect under redelivery: consumers in separate JVMs ({@link OnceConsumerChild}, 2 JVMs x
 * 2 workers on one consumer group, lease 1 s) process every message with an idempotency marker
 * ({@code once(ns, "msg:" + id, ttl.required())}), an effect and the ack in ONE bundle, while they are
 * killed with SIGKILL mid-batch (most kills land in the handler's sleep between the effect and the
 * commit) and their leases expire. At the end every message has exactly one marker (written once) and
 * exactly one effect, the source queue is empty for the group and nothing was dead-lettered.
 *
 * <p>The same run checks, per handling (table {@code tried}, written by the children):
 * <ul>
 *   <li>every effect comes from a handling whose bundle committed, never from a zombie whose lease was
 *       taken over, nor from a handler that failed;</li>
 *   <li>for messages whose work was done elsewhere beforehand (marker and effect, no ack), the bundle
 *       answers {@code KV_PRECONDITION} with the winner's value and the consumer acks separately. Anywhere
 *       else {@code KV_PRECONDITION} reaches only a zombie: the new holder committed the marker first, and
 *       since the bundle runs {@code once()} before {@code ack()} the marker answers before the lease
 *       fence; the zombie's separate ack then changes nothing ({@code ALREADY_ACKED}, or {@code LEASE_LOST}
 *       while the new holder's lease still covers the message). An {@code ACKED} there
 *       would be a message delivered again after its marker and its ack had committed together;</li>
 *   <li>a handler that fails before the commit (in the JDBC variant: after the bundle was applied on its
 *       connection, before the caller's commit) leaves no marker: its retry's {@code required} once()
 *       succeeds and does the work.</li>
 * </ul>
 *
 * <p>Two variants: the effect is a message pushed to a second queue and the bundle is committed with
 * {@code commit()}; or the effect is a row inserted with plain JDBC and the bundle is applied with
 * {@code commit(connection)} inside that same transaction, which the worker then commits.
 */
@QueenPostgres
@Slow
class ExactlyOnceIT {
  private static final Logger LOG = LoggerFactory.getLogger(ExactlyOnceIT.class);
  private static final Duration LEASE = Duration.ofSeconds(1);
  private static final KvOptions MARKER = Kv.ttl(Duration.ofHours(1)).required();
  private static final int MESSAGES = 240;
  private static final int PARTITIONS = 8;
  private static final int CHILDREN = 2;
  private static final int WORKERS = 2;
  private static final int BATCH = 4;
  private static final int SLEEP_MS = 30;
  private static final int SLOW_MS = 1500;
  private static final int KILLS = 5;
  /** Messages a victim must commit since the previous look before it is killed. */
  private static final int PROGRESS_BEFORE_KILL = 10;

  private Queen observer;
  private TestDatabase db;
  private final List<ChildJvm> children = new ArrayList<>();

  @BeforeEach
  void start(TestDatabase db, DataSource ds) throws SQLException {
    this.db = db;
    observer = EmbeddedQueen.builder().dataSource(ds).nodeId("observer").start();
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists tried(id bigserial primary key, message_id uuid not null, pid int not null,"
          + " attempt int not null, outcome text)");
      st.execute("create table if not exists first_time(kind text not null, message_id uuid not null,"
          + " primary key (kind, message_id))");
      st.execute("create table if not exists effect(message_id uuid not null, n int not null, pid int not null,"
          + " try_id bigint not null)");
      st.execute("truncate tried, first_time, effect");
    }
  }

  @AfterEach
  void stop() {
    children.forEach(ChildJvm::close);
    observer.close();
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void onceEffectAndAckInOneCommitSurviveKillsAndLeaseExpiry() throws Exception {
    run(OnceConsumerChild.COMMIT, "once-src", "once-effects", "effects");
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void onceAndAckAppliedInTheCallersJdbcTransactionWithTheEffectRowSurviveKills() throws Exception {
    run(OnceConsumerChild.CONNECTION, "once-src-jdbc", "effect", "effects-jdbc");
  }

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void onceEffectAndAckCommittedByTheConsumeLoopSurviveKills() throws Exception {
    run(OnceConsumerChild.LOOP, "once-src-loop", "once-effects-loop", "effects-loop");
  }

  private static boolean fails(int n) {
    return n % 30 == 7;
  }

  private static boolean slow(int n) {
    return n % 30 == 17;
  }

  private static boolean doneElsewhere(int n) {
    return n % 30 == 27;
  }

  private void run(String mode, String queue, String target, String ns) throws Exception {
    long t0 = System.nanoTime();
    observer.queue(queue).configure(c -> c.leaseTime(LEASE).retryLimit(50).retryDelay(Duration.ofMillis(100)));
    List<PushItem> items = new ArrayList<>();
    for (int n = 0; n < MESSAGES; n++) {
      items.add(PushItem.of("p" + (n % PARTITIONS), Map.of("n", n, "fail", fails(n), "slow", slow(n))));
    }
    Map<UUID, Integer> pushed = new LinkedHashMap<>();
    Map<UUID, String> partitionOf = new HashMap<>();
    for (PushResult r : observer.queue(queue).push(items)) {
      pushed.put(r.messageId(), r.index());
      partitionOf.put(r.messageId(), r.partition());
    }
    assertThat(pushed).hasSize(MESSAGES);
    Set<UUID> failing = ids(pushed, ExactlyOnceIT::fails);
    Set<UUID> preDone = ids(pushed, ExactlyOnceIT::doneElsewhere);

    // somebody else already did the work of some messages (marker + effect, no ack): their consumers must
    // get KV_PRECONDITION with the winner's value and take the message off the cursor with a separate ack
    for (UUID id : preDone) {
      CommitResult res;
      if (!mode.equals(OnceConsumerChild.CONNECTION)) {
        res = observer.transaction().once(ns, "msg:" + id, MARKER)
            .push(target, partitionOf.get(id), Map.of("messageId", id.toString(), "n", pushed.get(id), "pid", 0,
                "tryId", 0))
            .commit();
      } else {
        try (Connection c = db.connection()) {
          c.setAutoCommit(false);
          insertEffect(c, id, pushed.get(id));
          res = observer.transaction().once(ns, "msg:" + id, MARKER).commit(c);
          c.commit();
        }
      }
      assertThat(res.success()).isTrue();
    }

    List<ChildJvm> live = new ArrayList<>();
    for (int i = 0; i < CHILDREN; i++) {
      live.add(child(mode, queue, target, ns));
    }
    Set<Long> killed = new HashSet<>();
    for (int k = 0; k < KILLS; k++) {
      int slot = k % CHILDREN;
      ChildJvm victim = live.get(slot);
      int goal = doneSoFar(victim) + PROGRESS_BEFORE_KILL;
      victim.awaitLine(l -> done(l) >= goal, Duration.ofSeconds(60));
      victim.kill();
      assertThat(victim.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
      killed.add(victim.pid());
      long lag = lag(observer, queue, Queen.DEFAULT_GROUP);
      LOG.info("[{}] kill {}: child {} killed after {} commits; lag now {}", mode, k + 1, victim.pid(), doneSoFar(victim),
          lag);
      assertThat(lag).as("kill %d must land while there is work left", k + 1).isPositive();
      live.set(slot, child(mode, queue, target, ns));
    }
    long killsDoneAt = System.nanoTime();
    // the survivors (the last one fresh) drain the queue, including what the killed ones held
    within(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100))
        .until(() -> lag(observer, queue, Queen.DEFAULT_GROUP) == 0);
    within(Duration.ofSeconds(10)).until(() -> leases(observer, queue, Queen.DEFAULT_GROUP) == 0);
    long drainedAt = System.nanoTime();
    live.forEach(ChildJvm::close);

    // ---- exactly one marker per message, and nothing else in the namespace
    Map<String, Long> markers = query("select key, version from queen.kv where namespace = ?", ns,
        rs -> Map.entry(rs.getString(1), rs.getLong(2)));
    assertThat(markers.keySet()).as("one marker per message, nothing else")
        .isEqualTo(pushed.keySet().stream().map(id -> "msg:" + id).collect(Collectors.toSet()));
    // versions come from one sequence of the store: one each, never shared, whoever wrote them
    assertThat(markers.values()).as("a version per marker").doesNotHaveDuplicates().allMatch(v -> v > 0);

    // ---- exactly one effect per message
    List<Map.Entry<UUID, Long>> effects = !mode.equals(OnceConsumerChild.CONNECTION)
        ? queryList("select (m.payload->>'messageId')::uuid, (m.payload->>'tryId')::bigint from queen.messages m"
            + " join queen.partitions p on p.id = m.partition_id join queen.queues q on q.id = p.queue_id"
            + " where q.name = ?", target, rs -> Map.entry(rs.getObject(1, UUID.class), rs.getLong(2)))
        : queryList("select message_id, try_id from effect", null,
            rs -> Map.entry(rs.getObject(1, UUID.class), rs.getLong(2)));
    Map<UUID, Long> effectsPerMessage = effects.stream()
        .collect(Collectors.groupingBy(Map.Entry::getKey, Collectors.counting()));
    Map<UUID, Long> notOnce = new HashMap<>();
    effectsPerMessage.forEach((id, count) -> {
      if (count != 1) {
        notOnce.put(id, count);
      }
    });
    assertThat(notOnce).as("messages whose effect was written other than once").isEmpty();
    assertThat(effectsPerMessage.keySet()).as("one effect per message, none lost, none invented")
        .isEqualTo(pushed.keySet());
    Map<UUID, Long> effectTry = effects.stream().collect(Collectors.toMap(Map.Entry::getKey, Map.Entry::getValue));

    // ---- the source queue is empty for the group, and nothing was dead-lettered
    assertThat(lag(observer, queue, Queen.DEFAULT_GROUP)).isZero();
    assertThat(observer.deadLetters(queue).defaultGroup().count()).isZero();

    // ---- per handling: which committed, which met a fence, which were cut by a kill
    List<Try> tries = queryList("select id, message_id, pid, attempt, outcome from tried order by id", null,
        rs -> new Try(rs.getLong(1), rs.getObject(2, UUID.class), (int) rs.getLong(3), (int) rs.getLong(4),
            rs.getString(5)));
    Map<Long, Try> byTryId = tries.stream().collect(Collectors.toMap(Try::id, t -> t));
    assertThat(tries).extracting(Try::messageId).allMatch(pushed::containsKey);
    for (Map.Entry<UUID, Long> e : effectTry.entrySet()) {
      UUID id = e.getKey();
      if (preDone.contains(id)) {
        assertThat(e.getValue()).as("the effect of %s is the one written before the consumers ran", id).isZero();
        continue;
      }
      Try t = byTryId.get(e.getValue());
      assertThat(t).as("the effect of %s comes from a recorded handling", id).isNotNull();
      assertThat(t.messageId()).isEqualTo(id);
      assertThat(t.outcome()).as("the effect of %s comes from a handling whose bundle committed (or that was killed right"
          + " after the commit), never from one that met a fence or failed", id).isIn("COMMITTED", null);
    }
    Map<String, Long> outcomes = tries.stream()
        .collect(Collectors.groupingBy(t -> t.outcome() == null ? "CUT" : t.outcome(), Collectors.counting()));
    List<Try> preconditions = tries.stream()
        .filter(t -> t.outcome() != null && t.outcome().startsWith("PRECONDITION")).toList();
    // (the consume loop's handler does not see its bundle's outcome: there the proof is the effect's tryId above,
    // and the loop's own counts in the children's DONE lines)
    boolean loop = mode.equals(OnceConsumerChild.LOOP);
    if (!loop) {
      assertThat(preconditions.stream().filter(t -> preDone.contains(t.messageId()))
          .filter(t -> !t.outcome().equals("PRECONDITION_LEASE_LOST") && !t.outcome().equals("PRECONDITION_ALREADY_ACKED"))
          .map(Try::messageId).collect(Collectors.toSet()))
          .as("every message done elsewhere met KV_PRECONDITION and was then acked separately")
          .isEqualTo(preDone);
    }
    // Elsewhere KV_PRECONDITION only reaches a zombie: a handling whose lease was taken over by a consumer that
    // then committed the work (the bundle runs once() before ack(), so the marker answers first). Its separate
    // ack then changes nothing: ALREADY_ACKED once the new holder's bundle moved the cursor past it, LEASE_LOST while
    // the new holder's lease still covers it. An ACKED here would mean a message was delivered again after a bundle
    // had committed its marker together with its ack.
    List<Try> zombiePreconditions = preconditions.stream().filter(t -> !preDone.contains(t.messageId())).toList();
    assertThat(zombiePreconditions).as("KV_PRECONDITION on work done by a consumer of this group reaches only a zombie,"
        + " whose separate ack changes nothing").allSatisfy(t -> assertThat(t.outcome()).isIn("PRECONDITION_LEASE_LOST",
            "PRECONDITION_ALREADY_ACKED", "PRECONDITION"));
    Set<UUID> failedIds = tries.stream().filter(t -> "FAILED".equals(t.outcome())).map(Try::messageId)
        .collect(Collectors.toSet());
    assertThat(failedIds).as("only the failing messages failed, and some did").isNotEmpty().isSubsetOf(failing);
    // a failed handling left no marker: otherwise its retry's required once() could not have done the work
    for (Try t : tries) {
      if ("FAILED".equals(t.outcome())) {
        assertThat(effectTry.get(t.messageId())).as("the retry of failed handling %d did the work", t.id())
            .isNotEqualTo(t.id());
        assertThat(byTryId.get(effectTry.get(t.messageId())).id()).isGreaterThan(t.id());
      }
    }
    long leaseLost = outcomes.getOrDefault("LEASE_LOST", 0L);
    List<Try> cut = tries.stream().filter(t -> t.outcome() == null).toList();
    long cutAfterCommit = cut.stream().filter(t -> Long.valueOf(t.id()).equals(effectTry.get(t.messageId()))).count();
    Map<UUID, Long> deliveries = tries.stream().collect(Collectors.groupingBy(Try::messageId, Collectors.counting()));
    long redelivered = deliveries.values().stream().filter(c -> c > 1).count();
    int maxAttempt = tries.stream().mapToInt(Try::attempt).max().orElse(0);
    assertThat(killed).hasSize(KILLS);
    assertThat(cut).as("kills landed inside handlings").isNotEmpty();
    assertThat(redelivered).as("messages were redelivered").isPositive();
    if (!loop) { // the loop renews leases while its handler runs: a slow handler keeps its lease there
      assertThat(leaseLost + zombiePreconditions.size()).as("leases expired under live consumers, whose bundles then met"
          + " the fence (LEASE_LOST) or the new holder's marker (KV_PRECONDITION)").isPositive();
    }
    List<String> errors = new ArrayList<>();
    for (ChildJvm c : children) {
      c.lines().stream().filter(l -> l.startsWith("ERROR")).forEach(l -> errors.add(c.pid() + ": " + l));
      c.lines().stream().filter(l -> l.startsWith("PRECONDITION ")).forEach(l -> {
        java.util.regex.Matcher pm = java.util.regex.Pattern.compile("^PRECONDITION (\\S+) value=true version=(\\d+)"
            + " failedOperation=0 ").matcher(l);
        assertThat(pm.find()).as("the loser gets the winner's value and version, and acks separately: %s", l).isTrue();
        assertThat(Long.parseLong(pm.group(2))).as("the winner's version, as stored: %s", l)
            .isEqualTo(markers.get("msg:" + pm.group(1)));
      });
    }
    assertThat(errors).as("no handler failed unexpectedly").isEmpty();

    String summary = String.format("ExactlyOnceIT[%s]: %d messages, %d kills; %d handlings, %d messages handled more"
            + " than once (max attempt %d); cut by a kill: %d (%d of them after their commit had landed); outcomes %s;"
            + " KV_PRECONDITION answers %d (%d for the %d messages done elsewhere, %d to zombies); LEASE_LOST %d;"
            + " handler failures %d;"
            + " kills took %d ms, drain %d ms, total %d ms",
        mode, MESSAGES, killed.size(), tries.size(), redelivered, maxAttempt, cut.size(), cutAfterCommit, outcomes,
        preconditions.size(), preconditions.size() - zombiePreconditions.size(), preDone.size(),
        zombiePreconditions.size(), leaseLost, failedIds.size(), ms(killsDoneAt - t0), ms(drainedAt - killsDoneAt),
        ms(System.nanoTime() - t0));
    LOG.info(summary);
    System.out.println(summary);
  }

  private static long ms(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(nanos);
  }

  private static Set<UUID> ids(Map<UUID, Integer> pushed, java.util.function.IntPredicate which) {
    return pushed.entrySet().stream().filter(e -> which.test(e.getValue())).map(Map.Entry::getKey)
        .collect(Collectors.toSet());
  }

  private record Try(long id, UUID messageId, int pid, int attempt, String outcome) {}

  private ChildJvm child(String mode, String queue, String target, String ns) {
    ChildJvm c = ChildJvm.builder(OnceConsumerChild.class)
        .args(db.jdbcUrl(), db.user(), db.password(), queue, mode, target, ns, String.valueOf(WORKERS),
            String.valueOf(BATCH), String.valueOf(SLEEP_MS), String.valueOf(SLOW_MS))
        .jvmOptions("-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
        .echoTo(System.out)
        .start();
    children.add(c);
    return c;
  }

  /** The count of a {@code DONE <count> <id>} line, or -1 for any other line. */
  private static int done(String line) {
    if (!line.startsWith("DONE ")) {
      return -1;
    }
    int end = line.indexOf(' ', 5);
    return Integer.parseInt(line.substring(5, end < 0 ? line.length() : end));
  }

  private static int doneSoFar(ChildJvm c) {
    return c.lines().stream().mapToInt(ExactlyOnceIT::done).filter(d -> d >= 0).max().orElse(0);
  }

  private static void insertEffect(Connection c, UUID id, int n) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("insert into effect(message_id, n, pid, try_id) values (?, ?, 0, 0)")) {
      st.setObject(1, id);
      st.setInt(2, n);
      st.executeUpdate();
    }
  }

  @FunctionalInterface
  private interface RowReader<T> {
    T read(ResultSet rs) throws SQLException;
  }

  /** Runs {@code sql} with at most one text parameter ({@code null}: none). */
  private <T> List<T> queryList(String sql, String param, RowReader<T> reader) throws SQLException {
    List<T> out = new ArrayList<>();
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement(sql)) {
      if (param != null) {
        st.setString(1, param);
      }
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(reader.read(rs));
        }
      }
    }
    return out;
  }

  private <K, V> Map<K, V> query(String sql, String param, RowReader<Map.Entry<K, V>> reader) throws SQLException {
    Map<K, V> out = new HashMap<>();
    for (Map.Entry<K, V> e : queryList(sql, param, reader)) {
      assertThat(out.put(e.getKey(), e.getValue())).as("duplicate key %s", e.getKey()).isNull();
    }
    return out;
  }
}
