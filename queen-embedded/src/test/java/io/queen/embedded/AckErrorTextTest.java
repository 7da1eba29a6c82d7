package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.queen.DeadLetter;
import io.queen.DeadLetterException;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.testkit.QueenPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A handler's error text goes into the database with its failure ack. PostgreSQL's text refuses the NUL
 * character, and the consume loop sends the acks of all its workers in one call: an exception message holding
 * a NUL once failed that whole call, so the other workers' completed messages were handled again and the
 * failure itself was never recorded.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AckErrorTextTest {

  @Test
  void aNulInAHandlersErrorIsStoredReplacedAndCostsTheOtherWorkersNothing(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("nul").pollInterval(Duration.ofMillis(50))
        .start()) {
      queen.queue("nul").configure(c -> c.retryLimit(0));
      queen.queue("nul").partition("bad").push(Map.of("n", 0));
      for (int i = 0; i < 8; i++) {
        queen.queue("nul").partition("good" + i).push(Map.of("n", i + 1));
      }
      CyclicBarrier together = new CyclicBarrier(9); // all nine finish at once, so their acks share a call
      Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
      Subscription s = queen.queue("nul").consumer().concurrency(9).batch(1).consume(m -> {
        int n = calls.computeIfAbsent(m.partition(), k -> new AtomicInteger()).incrementAndGet();
        if (n == 1) {
          together.await(10, TimeUnit.SECONDS);
        }
        if (m.partition().equals("bad")) {
          throw new DeadLetterException("card \u0000 declined");
        }
      });
      await().atMost(Duration.ofSeconds(20)).until(() -> s.acked() == 8 && s.deadLettered() == 1);
      s.close();

      calls.forEach((p, n) -> assertThat(n.get()).as(p + " handled once").isEqualTo(1));
      List<DeadLetter> dead = queen.deadLetters("nul").defaultGroup().list(10, null);
      assertThat(dead).hasSize(1);
      assertThat(dead.get(0).error()).contains("card \uFFFD declined").doesNotContain("\u0000");
      assertThat(queen.status().queue("nul").groups().get(0).lag()).isZero();
    }
  }

  @Test
  void aManualFailureAckWithANulIsStoredReplaced(DataSource ds) {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("nul-manual").start()) {
      queen.queue("nul-manual").configure(c -> c.retryLimit(0));
      queen.queue("nul-manual").partition("p").push(Map.of("n", 0));
      var m = queen.queue("nul-manual").consumer().pop().get(0);
      queen.ack(m, io.queen.AckStatus.FAILED, "bad\u0000byte");
      assertThat(queen.deadLetters("nul-manual").defaultGroup().list(10, null)).extracting(DeadLetter::error)
          .singleElement().asString().contains("bad\uFFFDbyte");
    }
  }

  @Test
  void transactionAndTraceIdsWithANulAreRefusedUpFront() {
    assertThatThrownBy(() -> PushItem.of("p", Map.of()).transactionId("t\u0000"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("transactionId must not contain the NUL character (\\u0000), at index 1");
    assertThatThrownBy(() -> PushItem.of("p", Map.of()).traceId("\u0000"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("traceId must not contain the NUL character (\\u0000), at index 0");
  }
}
