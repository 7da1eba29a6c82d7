package io.queen.e2e;

import static io.queen.e2e.E2e.lag;
import static io.queen.e2e.E2e.leases;
import static io.queen.e2e.E2e.within;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.BrokerClosedException;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link Subscription#close()} and {@link Queen#close()} with slow handlers: they return within the grace
 * period (plus a bounded stop), give the leases back so another node pops the partitions at once (leases
 * are 30 s, so waiting for expiry would show), and a message interrupted by close is redelivered as
 * attempt 1: it is not counted as a failure.
 */
@QueenPostgres
class ShutdownIT {
  private static final Logger LOG = LoggerFactory.getLogger(ShutdownIT.class);
  private static final String G = Queen.DEFAULT_GROUP;
  private static final Duration GRACE = Duration.ofMillis(500);
  /** What close may take beyond the grace period: interrupting workers, releasing leases, stopping threads. */
  private static final long STOP_SLACK_MS = 3_000;

  private E2e.Nodes nodes;
  private TestDatabase db;

  @BeforeEach
  void init(TestDatabase db) {
    this.db = db;
    nodes = new E2e.Nodes(db, 6);
  }

  @AfterEach
  void stop() throws Exception {
    if (nodes != null) {
      nodes.close();
    }
  }

  private Queen node(String id, UnaryOperator<EmbeddedQueen.Builder> options) {
    return nodes.node(id, options);
  }

  /** Two partitions of three messages each. */
  private static void pushTwoPartitions(Queen node, String q) {
    List<PushItem> items = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      items.add(PushItem.of("p0", Map.of("n", i)));
      items.add(PushItem.of("p1", Map.of("n", i)));
    }
    node.queue(q).push(items);
  }

  /** A handler that blocks until interrupted, counting how many handlers are running. */
  private static final class Stuck {
    final CountDownLatch started;
    final Set<String> interrupted = ConcurrentHashMap.newKeySet();
    final AtomicInteger completed = new AtomicInteger();

    Stuck(int workers) {
      started = new CountDownLatch(workers);
    }

    void handle(Message m) throws InterruptedException {
      started.countDown();
      try {
        new CountDownLatch(1).await(); // only an interrupt ends this
      } catch (InterruptedException e) {
        interrupted.add(m.partition() + "@" + m.offset());
        throw e;
      }
      completed.incrementAndGet();
    }
  }

  /** The other node pops both partitions at once (no waiting for the 30 s leases) and finds attempt 1. */
  private static void otherNodeTakesOverAtOnce(Queen other, String q) {
    long t0 = System.nanoTime();
    List<Message> got = other.queue(q).consumer().batch(10).partitions(2).waitFor(Duration.ZERO).pop();
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertThat(ms).isLessThan(1000);
    assertThat(got).as("both partitions, from their first message").hasSize(6)
        .filteredOn(m -> m.offset() == 0).extracting(Message::partition).containsExactlyInAnyOrder("p0", "p1");
    assertThat(got).as("interrupted by close: not a failed attempt").extracting(Message::attempt).containsOnly(1);
    assertThat(other.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(lag(other, q, G)).isZero();
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void subscriptionCloseStopsWithinGraceAndReleasesTheLeases() throws Exception {
    String q = "shutdown-sub";
    Queen a = node("close-a", b -> b);
    Queen b = node("close-b", x -> x);
    pushTwoPartitions(a, q);
    Stuck stuck = new Stuck(2);
    Subscription s = a.queue(q).consumer().concurrency(2).batch(3).gracePeriod(GRACE).consume(stuck::handle);
    nodes.closeLater(s);
    assertThat(stuck.started.await(20, TimeUnit.SECONDS)).isTrue();
    assertThat(leases(b, q, G)).isEqualTo(2);

    long t0 = System.nanoTime();
    s.close();
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    LOG.info("Subscription.close() with two stuck handlers took {} ms (grace {})", ms, GRACE);
    assertThat(ms).isGreaterThanOrEqualTo(GRACE.toMillis() - 50).isLessThan(GRACE.toMillis() + STOP_SLACK_MS);
    assertThat(s.isRunning()).isFalse();
    assertThat(stuck.interrupted).containsExactlyInAnyOrder("p0@0", "p1@0");
    assertThat(stuck.completed.get()).isZero();
    assertThat(s.failed()).as("interrupted by close is not a failure").isZero();
    assertThat(Thread.getAllStackTraces().keySet()).noneMatch(t -> t.isAlive() && t.getName().startsWith("queen-close-a-" + q));
    assertThat(leases(b, q, G)).as("leases given back").isZero();

    otherNodeTakesOverAtOnce(b, q);
    s.close(); // idempotent
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void queenCloseStopsWithinGraceAndReleasesTheLeases() throws Exception {
    String q = "shutdown-queen";
    Queen a = node("qclose-a", x -> x.closeGracePeriod(GRACE));
    Queen b = node("qclose-b", x -> x);
    pushTwoPartitions(b, q);
    Stuck stuck = new Stuck(2);
    Subscription s = a.queue(q).consumer().concurrency(2).batch(3).consume(stuck::handle);
    assertThat(stuck.started.await(20, TimeUnit.SECONDS)).isTrue();
    assertThat(leases(b, q, G)).isEqualTo(2);

    long t0 = System.nanoTime();
    a.close();
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    LOG.info("Queen.close() with two stuck handlers took {} ms (grace {})", ms, GRACE);
    assertThat(ms).isGreaterThanOrEqualTo(GRACE.toMillis() - 50).isLessThan(GRACE.toMillis() + STOP_SLACK_MS);
    assertThat(s.isRunning()).isFalse();
    assertThat(stuck.interrupted).containsExactlyInAnyOrder("p0@0", "p1@0");
    assertThat(s.failed()).isZero();
    assertThat(Thread.getAllStackTraces().keySet()).noneMatch(t -> t.isAlive() && t.getName().startsWith("queen-qclose-a-"));
    assertThat(leases(b, q, G)).as("leases given back").isZero();
    assertThatThrownBy(() -> a.queue(q).push(Map.of("n", 99))).isInstanceOf(BrokerClosedException.class);

    otherNodeTakesOverAtOnce(b, q);
    a.close(); // idempotent
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void closeLetsARunningHandlerFinishWithinGraceAndAcknowledgesIt() throws Exception {
    String q = "shutdown-finish";
    Queen a = node("finish-a", x -> x);
    Queen b = node("finish-b", x -> x);
    a.queue(q).partition("p").pushAll(List.of(Map.of("n", 0), Map.of("n", 1)));
    CountDownLatch inHandler = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    List<Long> handled = new ArrayList<>();
    Subscription s = a.queue(q).consumer().batch(1).gracePeriod(Duration.ofSeconds(10)).consume(m -> {
      inHandler.countDown();
      release.await(); // finishes when the test lets it, during close
      synchronized (handled) {
        handled.add(m.offset());
      }
    });
    nodes.closeLater(s);
    assertThat(inHandler.await(20, TimeUnit.SECONDS)).isTrue();

    Thread closer = new Thread(s::close, "test-closer");
    long t0 = System.nanoTime();
    closer.start();
    within(Duration.ofSeconds(5)).until(() -> !s.isRunning());
    release.countDown();
    closer.join(15_000);
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertThat(closer.isAlive()).isFalse();
    assertThat(ms).as("close waited for the handler, not for the whole grace").isLessThan(5_000);
    assertThat(handled).containsExactly(0L);
    assertThat(s.handled()).isEqualTo(1);

    // offset 0 was acknowledged during close; offset 1 was never started and is free at once
    List<Message> got = b.queue(q).consumer().batch(10).waitFor(Duration.ZERO).pop();
    assertThat(got).extracting(Message::offset).containsExactly(1L);
    assertThat(got.get(0).attempt()).isEqualTo(1);
    assertThat(b.ack(got)).extracting(AckResult::outcome).containsOnly(AckOutcome.ACKED);
    assertThat(lag(b, q, G)).isZero();
  }
}
