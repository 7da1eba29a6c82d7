package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A message dead-lettered at a failure (no retries left) does not hold back the rest of its batch: the rest is
 * handled at once, in every handler form, not dead-lettered unhandled when the lease expires.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FailureReleaseTest {

  private interface Run {
    Subscription start(Queen queen, String q, List<Long> handled);
  }

  private static void check(TestDatabase db, String q, Run run) {
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).pollInterval(Duration.ofMillis(100)).start()) {
      queen.queue(q).configure(c -> c.retryLimit(0));
      queen.queue(q).partition("c0").pushAll(List.of(Map.of("i", 0), Map.of("i", 1), Map.of("i", 2)));
      List<Long> handled = new ArrayList<>();
      try (Subscription s = run.start(queen, q, handled)) {
        // well inside the 30 s lease
        await().atMost(Duration.ofSeconds(10)).until(() -> s.acked() == 2 && s.deadLettered() == 1);
      }
      synchronized (handled) {
        assertThat(handled).containsExactly(0L, 1L, 2L);
      }
      assertThat(queen.deadLetters(q).group("g").list(10, null)).singleElement()
          .satisfies(d -> assertThat(d.offset()).isZero());
    }
  }

  private static void handle(List<Long> handled, Message m) {
    synchronized (handled) {
      handled.add(m.offset());
    }
    if (m.offset() == 0) {
      throw new IllegalStateException("declined");
    }
  }

  @Test
  void plainHandler(TestDatabase db) {
    check(db, "plain", (queen, q, handled) -> queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(3)
        .consume(m -> handle(handled, m)));
  }

  @Test
  void transactionalHandler(TestDatabase db) {
    check(db, "tx", (queen, q, handled) -> queen.queue(q).group("g").subscription(SubscriptionMode.ALL).batch(3)
        .consumeInTransaction((m, tx) -> handle(handled, m)));
  }
}
