package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.ConsumerBuilder;
import io.queen.Message;
import io.queen.MessageHandler;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The cursor consumer's guarantees, one test each:
 * two workers never process one round twice; a crash in the middle of a round (terminated backend,
 * handler exception, handler {@code Error}, interrupt) leaves no duplicate and no loss; a consumer wakes
 * on NOTIFY and, without it, by polling; losing the LISTEN connection loses nothing; a round whose
 * partition is locked ends at once.
 */
@QueenPostgres
class ConsumerRoundIT {
  private static final Logger LOG = LoggerFactory.getLogger(ConsumerRoundIT.class);

  private E2e.Nodes nodes;
  private TestDatabase db;

  @BeforeEach
  void init(TestDatabase db) {
    this.db = db;
    nodes = new E2e.Nodes(db, 10);
  }

  @AfterEach
  void closeAll() throws Exception {
    if (nodes != null) {
      nodes.close();
    }
  }

  /** A node with its own pool, as if it were another JVM. */
  private Queen node(String id) {
    return node(id, b -> b);
  }

  private Queen node(String id, UnaryOperator<EmbeddedQueen.Builder> options) {
    return nodes.node(id, options);
  }

  private <T extends AutoCloseable> T closeLater(T t) {
    return nodes.closeLater(t);
  }

  private static Set<UUID> push(Queen queen, String q, int messages, int partitions) {
    List<PushItem> items = new ArrayList<>(messages);
    for (int i = 0; i < messages; i++) {
      items.add(PushItem.of("p" + (i % partitions), Map.of("n", i)));
    }
    Set<UUID> ids = new HashSet<>();
    for (PushResult r : queen.queue(q).push(items)) {
      ids.add(r.messageId());
    }
    return ids;
  }

  // ------------------------------------------------------------------------------------------------

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void twoWorkersNeverProcessOneRoundTwice() throws Exception {
    Queen a = node("round-a");
    Queen b = node("round-b");

    // the consume loop: two nodes, two workers each, one group
    String q = "rounds";
    E2e.Recorder rec = new E2e.Recorder();
    Subscription sa = closeLater(a.queue(q).consumer().concurrency(2).batch(5).consume(rec::record));
    Subscription sb = closeLater(b.queue(q).consumer().concurrency(2).batch(5).consume(rec::record));
    Set<UUID> pushed = push(a, q, 3000, 30);
    within(Duration.ofSeconds(60)).until(() -> rec.total.get() >= pushed.size() && lag(a, q, Queen.DEFAULT_GROUP) == 0);
    sa.close();
    sb.close();
    assertThat(rec.duplicates()).as("ids processed twice").isEmpty();
    assertThat(rec.seen.keySet()).isEqualTo(pushed);
    assertThat(rec.violations).isEmpty();
    assertThat(sa.handled() + sb.handled()).isEqualTo(pushed.size());
    assertThat(sa.handled()).as("node a took part").isPositive();
    assertThat(sb.handled()).as("node b took part").isPositive();

    // raw rounds: six threads on two nodes racing pop + ack over the same partitions
    String q2 = "rounds-raw";
    Set<UUID> pushed2 = push(a, q2, 3000, 30);
    E2e.Recorder raw = new E2e.Recorder();
    AtomicBoolean stop = new AtomicBoolean();
    List<CompletableFuture<Void>> poppers = new ArrayList<>();
    ExecutorService threads = Executors.newFixedThreadPool(6);
    for (int t = 0; t < 6; t++) {
      Queen node = t % 2 == 0 ? a : b;
      poppers.add(CompletableFuture.runAsync(() -> {
        ConsumerBuilder c = node.queue(q2).consumer().batch(7).partitions(3).waitFor(Duration.ofMillis(100));
        while (!stop.get()) {
          List<Message> got = c.pop();
          got.forEach(raw::record);
          if (!got.isEmpty()) {
            assertThat(node.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
          }
        }
      }, threads));
    }
    try {
      within(Duration.ofSeconds(60)).until(() -> raw.total.get() >= pushed2.size() && lag(a, q2, Queen.DEFAULT_GROUP) == 0);
    } finally {
      stop.set(true);
      try {
        CompletableFuture.allOf(poppers.toArray(CompletableFuture[]::new)).get(10, TimeUnit.SECONDS);
      } finally {
        threads.shutdownNow();
      }
    }
    assertThat(raw.duplicates()).as("ids popped twice").isEmpty();
    assertThat(raw.seen.keySet()).isEqualTo(pushed2);
    assertThat(raw.violations).isEmpty();
  }

  // ------------------------------------------------------------------------------------------------

  /** How a round breaks in {@link #crashMidRoundLeavesNoDuplicateAndNoLoss}. */
  enum Fault {
    /** Every backend of the consuming node is terminated (pg_terminate_backend), three times, while it consumes. */
    TERMINATED_BACKEND,
    /** The handler throws an exception on some messages, once each. */
    HANDLER_EXCEPTION,
    /** The handler throws an {@link Error} on some messages, once each. */
    HANDLER_ERROR,
    /** The worker is interrupted inside the handler: once the handler gives up, once it leaves the interrupt pending. */
    INTERRUPT
  }

  private static final int CRASH_MESSAGES = 700;
  private static final int CRASH_PARTITIONS = 10;
  private final Map<UUID, AtomicInteger> completions = new ConcurrentHashMap<>();
  private final Map<UUID, Integer> completedAttempt = new ConcurrentHashMap<>();
  private final Map<UUID, AtomicInteger> breaks = new ConcurrentHashMap<>();
  private final AtomicInteger completed = new AtomicInteger();

  /** Messages with {@code n % 20 == 3} break their first round (handler faults). */
  private static boolean planned(int n) {
    return n % 20 == 3;
  }

  private boolean breaksFirstTime(Message m) {
    return planned(m.payload().get("n").asInt()) && breaks.computeIfAbsent(m.id(), k -> new AtomicInteger()).get() == 0;
  }

  private void broke(Message m) {
    breaks.computeIfAbsent(m.id(), k -> new AtomicInteger()).incrementAndGet();
  }

  /**
   * A round that breaks in the middle. The handler's successful completions are counted per message id:
   * every message must complete, and exactly once; a message whose round broke completes once, after its
   * redelivery; a message that completed is never handled again.
   */
  @ParameterizedTest
  @EnumSource(Fault.class)
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void crashMidRoundLeavesNoDuplicateAndNoLoss(Fault fault) throws Exception {
    String q = "crash-" + fault.name().toLowerCase(Locale.ROOT).replace('_', '-');
    Queen pusher = node("pusher-" + fault.ordinal());
    Queen consumer;
    String app = "victim-" + Long.toHexString(System.nanoTime());
    MessageHandler faulty;
    switch (fault) {
      case TERMINATED_BACKEND -> {
        // its own pool, tagged with an application name, so the test can kill exactly its backends
        consumer = closeLater(EmbeddedQueen.builder().jdbcUrl(E2e.urlWithApplicationName(db, app), db.user(),
            db.password()).poolSize(6).nodeId("victim").start());
        faulty = m -> Thread.sleep(2);
      }
      case HANDLER_EXCEPTION -> {
        consumer = pusher;
        faulty = m -> {
          if (breaksFirstTime(m)) {
            broke(m);
            throw new IllegalStateException("handler failed on n=" + m.payload().get("n"));
          }
        };
      }
      case HANDLER_ERROR -> {
        consumer = pusher;
        faulty = m -> {
          if (breaksFirstTime(m)) {
            broke(m);
            throw new AssertionError("handler Error on n=" + m.payload().get("n"));
          }
        };
      }
      case INTERRUPT -> {
        consumer = pusher;
        faulty = m -> {
          if (breaksFirstTime(m)) {
            // the worker is interrupted inside the handler, which notices (cancelled) and gives up
            broke(m);
            Thread.currentThread().interrupt();
            Thread.sleep(60_000); // throws at once
          } else if (m.payload().get("n").asInt() % 20 == 5) {
            // an interrupt the handler leaves pending: the round must still acknowledge its work
            Thread.currentThread().interrupt();
          }
        };
      }
      default -> throw new IllegalStateException(fault.name());
    }

    pusher.queue(q).configure(c -> c.retryLimit(3));
    Set<UUID> pushed = push(pusher, q, CRASH_MESSAGES, CRASH_PARTITIONS);
    Subscription s = closeLater(consumer.queue(q).consumer().concurrency(2).batch(10).consume(m -> {
      faulty.handle(m);
      completions.computeIfAbsent(m.id(), k -> new AtomicInteger()).incrementAndGet();
      completedAttempt.put(m.id(), m.attempt());
      completed.incrementAndGet();
    }));
    int killedBackends = 0;
    Set<Integer> killedListeners = new HashSet<>();
    if (fault == Fault.TERMINATED_BACKEND) {
      for (int threshold : new int[] {CRASH_MESSAGES / 4, CRASH_MESSAGES / 2, CRASH_MESSAGES * 3 / 4}) {
        within(Duration.ofSeconds(60)).until(() -> completed.get() >= threshold);
        // the pool's backends carry the pool's application name; the wake-up listener's, its own
        killedListeners.addAll(E2e.listenerPids(db, consumer));
        int k = E2e.terminateBackends(db, app) + E2e.terminateBackends(db, E2e.listenerName(consumer));
        killedBackends += k;
        LOG.info("terminated {} backends of node victim after {} completions", k, completed.get());
      }
    }
    within(Duration.ofSeconds(60)).until(() -> completed.get() >= CRASH_MESSAGES && lag(pusher, q, Queen.DEFAULT_GROUP) == 0);
    long alive = Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith("queen-" + consumer.nodeId() + "-" + q + "-")).count();
    assertThat(alive).as("both workers, the claimer and the acker survived").isEqualTo(4);
    s.close();

    assertThat(completions.keySet()).as("every message completed").isEqualTo(pushed);
    Map<UUID, Integer> twice = new HashMap<>();
    completions.forEach((id, n) -> {
      if (n.get() != 1) {
        twice.put(id, n.get());
      }
    });
    assertThat(twice).as("messages that completed more than once").isEmpty();
    assertThat(s.handled()).isEqualTo(CRASH_MESSAGES);
    assertThat(lag(pusher, q, Queen.DEFAULT_GROUP)).isZero();
    assertThat(pusher.deadLetters(q).defaultGroup().count()).isZero();
    if (fault == Fault.TERMINATED_BACKEND) {
      assertThat(killedBackends).as("backends terminated").isGreaterThanOrEqualTo(3);
      assertThat(killedListeners).as("the listener's backends terminated").isNotEmpty();
      within(Duration.ofSeconds(15)).until(() -> E2e.internals(consumer).wakeups().connected()
          && E2e.listenerPids(db, consumer).stream().anyMatch(pid -> !killedListeners.contains(pid)));
    } else {
      long expectedBreaks = IntStream.range(0, CRASH_MESSAGES).filter(ConsumerRoundIT::planned).count();
      assertThat(breaks).as("each planned break happened once").hasSize((int) expectedBreaks)
          .allSatisfy((id, n) -> assertThat(n.get()).isEqualTo(1));
      assertThat(s.failed()).isEqualTo(expectedBreaks);
      breaks.keySet().forEach(id -> assertThat(completedAttempt.get(id))
          .as("a message whose handler failed completes on its second attempt").isEqualTo(2));
    }
  }

  // ------------------------------------------------------------------------------------------------

  /** Waits until the subscription's claimer is parked in the wake-up wait (after an empty pop). */
  private static void awaitIdle(Queen node, String q) {
    String name = "queen-" + node.nodeId() + "-" + q + "-default-claimer"; // the thread that pops for the workers
    within(Duration.ofSeconds(10)).until(() -> Thread.getAllStackTraces().entrySet().stream()
        .filter(e -> e.getKey().getName().equals(name))
        .anyMatch(e -> e.getKey().getState() == Thread.State.TIMED_WAITING
            && Arrays.stream(e.getValue()).anyMatch(f -> f.getClassName().endsWith(".SubscriptionImpl") && f.getMethodName().equals("awaitNudge"))));
  }

  /** Pushes from {@code pusher} while {@code consumer}'s worker waits; returns how long delivery took, in ms. */
  private List<Long> deliveryLatencies(Queen pusher, Queen consumer, String q, int times) {
    Map<Integer, Long> received = new ConcurrentHashMap<>();
    closeLater(consumer.queue(q).consumer().consume(m -> received.put(m.payload().get("n").asInt(), System.nanoTime())));
    List<Long> latencies = new ArrayList<>();
    for (int i = 0; i < times; i++) {
      awaitIdle(consumer, q);
      long t0 = System.nanoTime();
      pusher.queue(q).push(Map.of("n", i));
      int n = i;
      within(Duration.ofSeconds(10)).until(() -> received.containsKey(n));
      latencies.add(TimeUnit.NANOSECONDS.toMillis(received.get(n) - t0));
    }
    within(Duration.ofSeconds(5)).until(() -> lag(pusher, q, Queen.DEFAULT_GROUP) == 0);
    assertThat(received).as("every pushed message arrived once").hasSize(times);
    return latencies;
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void consumerWakesOnNotify() {
    Queen pusher = node("notify-pusher");
    // polls only every 30 s: a delivery within ~2 s can only come from the notification
    Queen consumer = node("notify-consumer", b -> b.pollInterval(Duration.ofSeconds(30)));
    within(Duration.ofSeconds(10)).until(() -> E2e.internals(consumer).wakeups().connected());
    // and the pusher knows it is not alone: a node alone sends no NOTIFY, and learns of a new one from its hello or its
    // next heartbeat (the hello is missed when the pusher's own listener was not connected yet: then up to one
    // heartbeat interval, during which a message waits for the consumer's poll); the heartbeat is seen in the database
    within(Duration.ofSeconds(10)).until(() -> E2e.beatSinceStartOf(db, pusher, consumer));
    List<Long> latencies = deliveryLatencies(pusher, consumer, "wake-notify", 3);
    LOG.info("NOTIFY wake-up latencies {} ms", latencies);
    assertThat(latencies).allSatisfy(ms -> assertThat(ms).isLessThan(2000));
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void consumerWakesOnPoll() {
    Queen pusher = node("poll-pusher");
    Queen consumer = node("poll-consumer", b -> b.listen(false).pollInterval(Duration.ofMillis(200)));
    assertThat(E2e.internals(consumer).wakeups().connected()).as("no LISTEN connection").isFalse();
    List<Long> latencies = deliveryLatencies(pusher, consumer, "wake-poll", 3);
    LOG.info("poll wake-up latencies {} ms", latencies);
    assertThat(latencies).allSatisfy(ms -> assertThat(ms).isLessThan(2000));
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void listenLossLosesNothing() throws Exception {
    String q = "listen-loss";
    int messages = 400;
    Queen pusher = node("loss-pusher");
    Queen consumer = node("loss-consumer", b -> b.pollInterval(Duration.ofSeconds(1)));
    within(Duration.ofSeconds(10)).until(() -> E2e.internals(consumer).wakeups().connected()
        && E2e.listenerPids(db, consumer).size() == 1);
    E2e.Recorder rec = new E2e.Recorder();
    Subscription s = closeLater(consumer.queue(q).consumer().concurrency(2).batch(10).consume(rec::record));
    Set<UUID> pushed = ConcurrentHashMap.newKeySet();
    CompletableFuture<Void> producer = CompletableFuture.runAsync(() -> {
      for (int i = 0; i < messages; i++) {
        pushed.add(pusher.queue(q).partition("p" + (i % 4)).push(Map.of("n", i)).messageId());
      }
    });

    within(Duration.ofSeconds(30)).until(() -> rec.total.get() >= 50);
    int oldPid = E2e.listenerPids(db, consumer).get(0);
    assertThat(E2e.terminateBackend(db, oldPid)).isTrue();
    within(Duration.ofSeconds(15)).until(() -> { // the old backend gone, a new one listening
      List<Integer> now = E2e.listenerPids(db, consumer);
      return E2e.internals(consumer).wakeups().connected() && now.size() == 1 && now.get(0) != oldPid;
    });
    LOG.info("listener {} killed after {} handled; reconnected as {}", oldPid, rec.total.get(),
        E2e.listenerPids(db, consumer));

    producer.get(60, TimeUnit.SECONDS);
    within(Duration.ofSeconds(30)).until(() -> rec.total.get() >= messages && lag(pusher, q, Queen.DEFAULT_GROUP) == 0);
    s.close();
    assertThat(pushed).hasSize(messages);
    assertThat(rec.seen.keySet()).isEqualTo(pushed);
    assertThat(rec.duplicates()).isEmpty();
    assertThat(rec.violations).isEmpty();
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void roundLockedEndsAtOnce() throws Exception {
    String q = "locked";
    Queen a = node("lock-a");
    Queen b = node("lock-b");
    a.queue(q).partition("only").push(Map.of("n", 0));

    // 1. another consumer holds the lease on the only partition
    List<Message> held = a.queue(q).consumer().pop();
    assertThat(held).hasSize(1);
    long t0 = System.nanoTime();
    List<Message> none = b.queue(q).consumer().waitFor(Duration.ZERO).pop();
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertThat(none).isEmpty();
    assertThat(ms).as("pop on a leased partition ends at once").isLessThan(1000);
    assertThat(a.ack(held.get(0)).outcome()).isEqualTo(AckOutcome.ACKED);

    // 2. another transaction holds the cursor row itself locked (a round in progress): SKIP LOCKED, no wait
    a.queue(q).partition("only").push(Map.of("n", 1));
    try (Connection c = db.connection()) {
      c.setAutoCommit(false);
      try (PreparedStatement st = c.prepareStatement("select cu.partition_id from queen.cursors cu"
          + " join queen.queues qq on qq.id = cu.queue_id where qq.name = ? for update of cu")) {
        st.setString(1, q);
        int locked = 0;
        try (ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            locked++;
          }
        }
        assertThat(locked).as("cursor rows locked").isEqualTo(1);
      }
      t0 = System.nanoTime();
      none = b.queue(q).consumer().waitFor(Duration.ZERO).pop();
      ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertThat(none).isEmpty();
      assertThat(ms).as("pop on a locked cursor ends at once").isLessThan(1000);
      c.rollback();
    }
    List<Message> got = b.queue(q).consumer().pop();
    assertThat(got).extracting(Message::offset).containsExactly(1L);
    assertThat(b.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(lag(a, q, Queen.DEFAULT_GROUP)).isZero();
  }
}
