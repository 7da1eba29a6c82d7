package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.queen.AckOutcome;
import io.queen.DeadLetter;
import io.queen.Message;
import io.queen.NodeIdInUseException;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.internal.ops.Liveness;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Liveness apart from processing time: node rows and heartbeats, static node ids, leases of dead
 * nodes free after the session timeout, and the lease fence for live nodes unchanged.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
public class LivenessTest {
  private static final Duration LONG_LEASE = Duration.ofMinutes(5);

  private static Queen node(DataSource ds, String id, Duration sessionTimeout) {
    return EmbeddedQueen.builder().dataSource(ds).nodeId(id).sessionTimeout(sessionTimeout).listen(false).start();
  }

  /**
   * Simulates a crash, or a pause past the session timeout: the node's heartbeat stops and its row is made stale at
   * once; its other threads go on. The node was started on {@code ds}. (Also used by {@code tx.ZombieBundleTest}.)
   */
  public static void kill(FrozenHeartbeats ds, Queen q) throws SQLException, InterruptedException {
    ds.freeze(q);
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("update queen.nodes"
        + " set heartbeat_at = clock_timestamp() - interval '1 hour', dead_after = clock_timestamp() - interval '1 second'"
        + " where node_id = ?")) {
      st.setString(1, q.nodeId());
      assertThat(st.executeUpdate()).isEqualTo(1);
    }
  }

  private record Row(UUID incarnation, Timestamp heartbeatAt, boolean live, long sessionTimeoutMs, String version) {}

  private static Row row(DataSource ds, String id) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select incarnation, heartbeat_at,"
        + " dead_after > clock_timestamp(), session_timeout_ms, version from queen.nodes where node_id = ?")) {
      st.setString(1, id);
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() ? new Row(rs.getObject(1, UUID.class), rs.getTimestamp(2), rs.getBoolean(3), rs.getLong(4),
            rs.getString(5)) : null;
      }
    }
  }

  private static String lastError(DataSource ds, String queue) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select cu.last_error from"
        + " queen.cursors cu join queen.queues q on q.id = cu.queue_id where q.name = ?")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getString(1);
      }
    }
  }

  @Test
  void aNodeHasARowThatHeartbeatsAndCloseRemovesIt(DataSource ds) throws Exception {
    Queen q = node(ds, "beat-1", Duration.ofSeconds(2)); // a beat every 400 ms
    try {
      Row first = row(ds, "beat-1");
      assertThat(first).isNotNull();
      assertThat(first.live()).isTrue();
      assertThat(first.sessionTimeoutMs()).isEqualTo(2_000);
      assertThat(first.version()).isEqualTo(Queen.version());
      assertThat(Thread.getAllStackTraces().keySet()).extracting(Thread::getName).contains("queen-beat-1-heartbeat-1");
      java.util.Set<Timestamp> beats = new java.util.TreeSet<>(List.of(first.heartbeatAt()));
      org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(5)).pollInterval(Duration.ofMillis(50)).until(() -> {
        Row later = row(ds, "beat-1");
        assertThat(later.incarnation()).as("the same start beats").isEqualTo(first.incarnation());
        beats.add(later.heartbeatAt());
        return beats.size() >= 3;
      });
      assertThat(beats).as("two beats moved the heartbeat on the database clock").first().isEqualTo(first.heartbeatAt());
    } finally {
      q.close();
    }
    // (close() deletes the row of its own incarnation only: the row was this start's)
    assertThat(row(ds, "beat-1")).as("close() removes the row: a clean restart with the id is immediate").isNull();
    long t0 = System.nanoTime();
    node(ds, "beat-1", Duration.ofSeconds(2)).close();
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(2));
  }

  @Test
  void aSecondLiveNodeWithTheSameIdIsRefusedNamingTheId(DataSource ds) throws Exception {
    try (Queen a = node(ds, "orders-worker-1", Duration.ofSeconds(2))) {
      UUID before = row(ds, "orders-worker-1").incarnation();
      long t0 = System.nanoTime();
      assertThatThrownBy(() -> node(ds, "orders-worker-1", Duration.ofSeconds(10)))
          .isInstanceOf(NodeIdInUseException.class)
          .hasMessageContaining("node id 'orders-worker-1' is in use by a live node")
          .satisfies(e -> assertThat(((NodeIdInUseException) e).nodeId()).isEqualTo("orders-worker-1"));
      // (waiting for the holder's 10 s session timeout would take 10 s; the margin is for a loaded machine)
      assertThat(Duration.ofNanos(System.nanoTime() - t0)).as("refused once the holder's heartbeat moved")
          .isLessThan(Duration.ofSeconds(6));
      assertThat(row(ds, "orders-worker-1").incarnation()).as("nothing changed").isEqualTo(before);
      a.queue("refused").push(Map.of("n", 1)); // the holder works on
      assertThat(a.queue("refused").consumer().autoAck(true).pop()).hasSize(1);
    }
  }

  @Test
  void aNodeRestartedWithTheIdOfADeadOneFreesItsLeasesAtStart(DataSource ds) throws Exception {
    String q = "static";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    Queen old = node(frozen, "static-1", Duration.ofSeconds(10));
    try (Queen other = node(ds, "static-other", Duration.ofSeconds(10))) {
      old.queue(q).partition("p").pushAll(List.of(Map.of("n", 0), Map.of("n", 1)));
      List<Message> held = old.queue(q).consumer().batch(10).leaseTime(LONG_LEASE).pop();
      assertThat(held).hasSize(2);
      UUID before = row(ds, "static-1").incarnation();
      kill(frozen, old);

      long t0 = System.nanoTime();
      try (Queen restarted = node(ds, "static-1", Duration.ofSeconds(10))) {
        assertThat(Duration.ofNanos(System.nanoTime() - t0)).as("a stale holder does not make the start wait")
            .isLessThan(Duration.ofSeconds(6)); // (against its 10 s session timeout)
        assertThat(row(ds, "static-1").incarnation()).as("taken over by a new incarnation").isNotEqualTo(before);

        List<Message> again = other.queue(q).consumer().batch(10).pop();
        assertThat(again).as("another consumer has the partition at once (a head that failed before comes alone)")
            .extracting(Message::offset).containsExactly(0L);
        assertThat(again.get(0).attempt()).as("the crash counts one attempt").isEqualTo(2);
        assertThat(old.ack(held.get(0)).outcome()).as("the predecessor, were it only paused, is fenced")
            .isEqualTo(AckOutcome.LEASE_LOST);
        assertThat(other.ack(again)).extracting(r -> r.outcome()).containsOnly(AckOutcome.ACKED);
      }
      // (close() deletes the row of its own incarnation only: the row was the restarted node's)
      assertThat(row(ds, "static-1")).as("the restarted node's close removed the row").isNull();
    } finally {
      old.close(); // releases nothing of the new incarnation's
    }
  }

  @Test
  void aRestartRightAfterACrashWaitsForThePredecessorsHeartbeatToGoStale(DataSource ds) throws Exception {
    String q = "restart";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    Queen old = node(frozen, "restart-1", Duration.ofSeconds(2));
    try (Queen other = node(ds, "restart-other", Duration.ofSeconds(10))) {
      old.queue(q).partition("p").push(Map.of("n", 0));
      assertThat(old.queue(q).consumer().leaseTime(LONG_LEASE).pop()).hasSize(1);
      frozen.freeze(old); // crashed a moment ago: its row is still fresh

      long t0 = System.nanoTime();
      try (Queen restarted = node(ds, "restart-1", Duration.ofSeconds(2))) {
        Duration took = Duration.ofNanos(System.nanoTime() - t0);
        assertThat(took).as("start waited for the stale heartbeat (2 s), then took the id over")
            .isBetween(Duration.ofMillis(500), Duration.ofMillis(4_000));
        List<Message> again = other.queue(q).consumer().pop();
        assertThat(again).as("the predecessor's lease was expired at start").hasSize(1);
        assertThat(again.get(0).attempt()).isEqualTo(2);
        other.ack(again);
      }
    } finally {
      old.close();
    }
  }

  @Test
  void aLeaseOfANodeWithAStaleHeartbeatIsTakenWellBeforeItExpires(DataSource ds) throws Exception {
    String q = "stale";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    try (Queen dying = node(frozen, "dying", Duration.ofSeconds(2));
        Queen b = node(ds, "survivor", Duration.ofSeconds(2))) {
      dying.queue(q).partition("p").pushAll(List.of(Map.of("n", 0), Map.of("n", 1)));
      List<Message> held = dying.queue(q).consumer().batch(10).leaseTime(LONG_LEASE).pop();
      assertThat(held).hasSize(2);
      assertThat(b.queue(q).consumer().pop()).as("a live holder keeps its lease").isEmpty();

      long t0 = System.nanoTime();
      frozen.freeze(dying); // the heartbeat stops, nothing else is touched
      List<Message> got = await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
          .until(() -> b.queue(q).consumer().batch(10).pop(), l -> !l.isEmpty());
      Duration took = Duration.ofNanos(System.nanoTime() - t0);
      assertThat(took).as("about one session timeout (2 s), not the lease (5 min)")
          .isBetween(Duration.ofMillis(1_000), Duration.ofMillis(3_500));
      assertThat(got).extracting(Message::offset).as("a head that failed before comes alone").containsExactly(0L);
      assertThat(got.get(0).attempt()).isEqualTo(2);
      assertThat(lastError(ds, q)).isEqualTo("lease expired (owner dying stopped heartbeating)");

      // the dead-looking node was only frozen: it is fenced like an expired lease
      assertThat(dying.renew(held.get(0))).isFalse();
      assertThat(dying.ack(held)).extracting(r -> r.outcome()).containsOnly(AckOutcome.LEASE_LOST);
      assertThat(b.ack(got)).extracting(r -> r.outcome()).containsOnly(AckOutcome.ACKED);
      List<Message> rest = b.queue(q).consumer().batch(10).pop();
      assertThat(rest).extracting(Message::offset).containsExactly(1L);
      assertThat(rest.get(0).attempt()).as("only the head was blamed").isEqualTo(1);
      b.ack(rest);
      assertThat(b.status().queue(q).groups().get(0).lag()).isZero();
    }
  }

  /**
   * status() counts the leases consumers hold: a crashed node's are free to take once its heartbeat is stale, and an
   * operator reading "10 leased, no progress" could not tell them from a stuck consumer's. So they are not counted.
   */
  @Test
  void statusDoesNotCountTheLeasesOfANodeThatStoppedHeartbeating(DataSource ds) throws Exception {
    String q = "status-dead";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    try (Queen dying = node(frozen, "status-dying", Duration.ofSeconds(2));
        Queen b = node(ds, "status-survivor", Duration.ofSeconds(2))) {
      for (int p = 0; p < 3; p++) {
        dying.queue(q).partition("p" + p).push(Map.of("n", p));
      }
      assertThat(dying.queue(q).consumer().partitions(3).batch(10).leaseTime(LONG_LEASE).pop()).hasSize(3);
      assertThat(b.status().queue(q).group(Queen.DEFAULT_GROUP).leases()).isEqualTo(3);
      kill(frozen, dying);
      assertThat(b.status().queue(q).group(Queen.DEFAULT_GROUP).leases()).as("free for any consumer to take").isZero();
      assertThat(b.status().queue(q).group(Queen.DEFAULT_GROUP).lag()).isEqualTo(3);
    }
  }

  /**
   * A node whose own heartbeat is late (a loaded database delayed it past the session timeout) is still alive to
   * itself: its pops do not take its own leases as a dead node's. They once did, so two of its workers ran one
   * partition at once. Another node does take them, as for any node whose heartbeat went stale.
   */
  @Test
  void aNodeWithALateHeartbeatDoesNotTakeItsOwnLeases(DataSource ds) throws Exception {
    String q = "late";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    try (Queen late = node(frozen, "late", Duration.ofSeconds(2)); Queen b = node(ds, "other", Duration.ofSeconds(2))) {
      late.queue(q).partition("p").pushAll(List.of(Map.of("n", 0), Map.of("n", 1)));
      List<Message> held = late.queue(q).consumer().batch(1).leaseTime(LONG_LEASE).pop();
      assertThat(held).extracting(Message::offset).containsExactly(0L);
      kill(frozen, late); // its row says dead; the node itself goes on

      assertThat(late.queue(q).consumer().batch(10).pop()).as("its own lease is not free to itself").isEmpty();
      assertThat(late.renew(held.get(0))).as("and stays its own").isTrue();
      List<Message> taken = b.queue(q).consumer().batch(10).pop();
      assertThat(taken).as("another node takes a stale node's lease").extracting(Message::offset).containsExactly(0L);
      assertThat(late.ack(held)).extracting(r -> r.outcome()).containsOnly(AckOutcome.LEASE_LOST);
      b.ack(taken);
    }
  }

  @Test
  void aStaleOwnersAckStaysValidUntilSomeoneElseTakesTheLease(DataSource ds) throws Exception {
    String q = "paused";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    try (Queen a = node(frozen, "paused-a", Duration.ofSeconds(2));
        Queen b = node(ds, "paused-b", Duration.ofSeconds(2))) {
      a.queue(q).partition("p").push(Map.of("n", 0));
      a.queue(q).partition("p").push(Map.of("n", 1));
      List<Message> first = a.queue(q).consumer().leaseTime(LONG_LEASE).pop();
      kill(frozen, a);
      // a long GC pause: a is taken for dead, but nobody has taken its lease yet
      assertThat(a.renew(first.get(0))).as("its own renewal still works").isTrue();
      assertThat(a.ack(first.get(0)).outcome()).as("its own ack still works").isEqualTo(AckOutcome.ACKED);
      assertThat(b.queue(q).consumer().pop()).extracting(Message::offset).as("the partition moved on").containsExactly(1L);
    }
  }

  /**
   * The heartbeat's backend stops answering (a pause campaign stopped it with SIGSTOP): the beat gives up on its
   * socket and the next one goes through a new connection, so the node never looks dead and keeps its leases. Before,
   * the beat waited on the stopped backend for good, the node was taken for dead while it worked, and every lease it
   * took was taken from it, without a log line. Needs the server's processes on this machine (the embedded one).
   */
  @Test
  void aHeartbeatWhoseBackendStopsAnsweringGoesOnThroughANewConnection(DataSource ds) throws Exception {
    try (Queen a = node(ds, "stopped-beat", Duration.ofSeconds(3));
        io.queen.testkit.LogCapture logs = io.queen.testkit.LogCapture.start()) {
      String[] found = new String[1];
      // the heartbeat's backend once it has beaten (before, its last statement is its set-up), and between beats, so
      // that it holds no lock of the nodes row when it stops
      org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20)).until(() -> {
        try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select pid, state = 'idle'"
            + " from pg_stat_activity where query like 'update \"queen\".nodes set heartbeat_at%'"
            + " and datname = current_database()"); ResultSet rs = st.executeQuery()) {
          if (rs.next()) {
            found[0] = rs.getBoolean(2) ? rs.getString(1) : null;
            assertThat(rs.next()).as("one node, one heartbeat").isFalse();
          }
          return found[0] != null;
        }
      });
      String pid = found[0];
      org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.exists(java.nio.file.Path.of("/proc", pid)),
          "the server's processes are not on this machine");
      signal("STOP", pid);
      try {
        org.awaitility.Awaitility.await().during(Duration.ofSeconds(5)) // past the 3 s session timeout
            .atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(200))
            .untilAsserted(() -> assertThat(row(ds, "stopped-beat").live()).as("taken for dead while it lives").isTrue());
      } finally {
        signal("CONT", pid);
      }
      assertThat(logs.linesWith("WARN", "stopped-beat - heartbeat failed")).hasSize(1);
      assertThat(logs.linesWith("INFO", "stopped-beat - heartbeat is back")).hasSize(1);
    }
  }

  private static void signal(String signal, String pid) throws Exception {
    Process p = new ProcessBuilder("kill", "-" + signal, pid).redirectErrorStream(true).start();
    assertThat(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0).as("kill -%s %s", signal, pid).isTrue();
  }

  @Test
  void aLiveHandlerThatOverrunsItsLeaseStillLosesIt(DataSource ds) throws Exception {
    String q = "overrun";
    try (Queen a = node(ds, "overrun-a", Duration.ofSeconds(10)); Queen b = node(ds, "overrun-b", Duration.ofSeconds(10))) {
      a.queue(q).partition("p").push(Map.of("n", 0));
      List<Message> got = a.queue(q).consumer().leaseTime(Duration.ofMillis(500)).pop(); // never renewed
      assertThat(got).hasSize(1);
      List<Message> again = await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
          .until(() -> b.queue(q).consumer().pop(), l -> !l.isEmpty());
      assertThat(row(ds, "overrun-a").live()).as("a is alive and heartbeating").isTrue();
      assertThat(again).as("the lease expired although its owner lives").hasSize(1);
      assertThat(again.get(0).attempt()).as("an overrun counts one attempt").isEqualTo(2);
      assertThat(lastError(ds, q)).isEqualTo("lease expired (owner overrun-a)");
      assertThat(a.ack(got.get(0)).outcome()).as("the fence holds").isEqualTo(AckOutcome.LEASE_LOST);
      assertThat(b.status().queue(q).groups().get(0).lag()).as("the late ack changed nothing").isEqualTo(1);
      assertThat(b.ack(again.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);
    }
  }

  @Test
  void aMessageWhoseConsumersKeepDyingEndsInTheDeadLetterQueue(DataSource ds) throws Exception {
    String q = "poison-nodes";
    FrozenHeartbeats frozen = new FrozenHeartbeats(ds);
    try (Queen observer = node(ds, "poison-observer", Duration.ofSeconds(10))) {
      observer.queue(q).configure(c -> c.retryLimit(1).leaseTime(LONG_LEASE));
      observer.queue(q).push(List.of(PushItem.of("p", Map.of("n", 0)), PushItem.of("p", Map.of("n", 1))));
      List<Queen> dead = new ArrayList<>();
      try {
        for (int i = 1; i <= 2; i++) {
          Queen victim = node(frozen, "poison-victim-" + i, Duration.ofSeconds(10));
          dead.add(victim);
          List<Message> got = victim.queue(q).consumer().pop();
          assertThat(got).extracting(Message::offset).containsExactly(0L);
          assertThat(got.get(0).attempt()).isEqualTo(i);
          kill(frozen, victim); // it "crashes" on the message
        }
        List<Message> next = observer.queue(q).consumer().pop();
        assertThat(next).as("after 1 + retryLimit deliveries the head is dead-lettered and the partition goes on")
            .extracting(Message::offset).containsExactly(1L);
        observer.ack(next);
        List<DeadLetter> letters = observer.deadLetters(q).defaultGroup().list(10, null);
        assertThat(letters).hasSize(1);
        assertThat(letters.get(0).offset()).isZero();
        assertThat(letters.get(0).attempts()).isEqualTo(2);
        assertThat(letters.get(0).error()).isEqualTo("lease expired (owner poison-victim-2 stopped heartbeating)");
      } finally {
        dead.forEach(Queen::close);
      }
    }
  }

  @Test
  void sessionTimeoutIsValidated(DataSource ds) {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).sessionTimeout(Duration.ofSeconds(1)).start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("sessionTimeout must be between 2 s and 10 min, was 1 s");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).sessionTimeout(Duration.ofMinutes(11)).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("sessionTimeout");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).sessionTimeout(null))
        .isInstanceOf(NullPointerException.class).hasMessage("sessionTimeout must not be null");
  }

  @Test
  void theJanitorForgetsNodesSilentForADay(DataSource ds) throws Exception {
    try (Queen q = node(ds, "janitor-node", Duration.ofSeconds(10));
        Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("insert into queen.nodes(node_id,"
            + " incarnation, heartbeat_at, dead_after, session_timeout_ms) values ('crashed-long-ago', gen_random_uuid(),"
            + " now() - interval '25 hours', now() - interval '25 hours', 10000), ('crashed-recently', gen_random_uuid(),"
            + " now() - interval '1 hour', now() - interval '1 hour', 10000)")) {
      st.executeUpdate();
      assertThat(Liveness.forgetOldNodes(ds, "\"queen\"")).isEqualTo(1);
      assertThat(row(ds, "crashed-long-ago")).isNull();
      assertThat(row(ds, "crashed-recently")).isNotNull();
      assertThat(row(ds, "janitor-node")).isNotNull();
    }
  }
}
