package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What an operator reads at INFO: handler failures (WARN, summarised when they repeat), dead-letter moves
 * (WARN, whatever caused them), an outage of the database (one WARN when the consumer starts failing, one
 * INFO when it recovers, with how long it was down) and the listener's loss and return.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class OperatorLogTest {

  @Test
  void repeatedIdenticalHandlerFailuresAreSummarised(DataSource ds) {
    String q = "logs-storm";
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("log1").pollInterval(Duration.ofMillis(100))
        .start()) {
      for (int p = 0; p < 30; p++) {
        queen.queue(q).partition("p" + p).push(Map.of("p", p));
      }
      Set<String> failedOnce = ConcurrentHashMap.newKeySet();
      try (LogCapture logs = LogCapture.start();
          Subscription s = queen.queue(q).consumer().concurrency(2).consume(m -> {
            if (failedOnce.add(m.partition())) {
              throw new IllegalStateException("boom");
            }
          })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 30);
        assertThat(s.failed()).isEqualTo(30);
        // 30 identical failures within a minute: ten lines, one stack trace, the rest counted
        assertThat(logs.linesWith("WARN", "handler of queue '" + q + "' (default group) failed on")).hasSize(10);
        assertThat(logs.lines().stream().filter(l -> l.startsWith("java.lang.IllegalStateException: boom"))).hasSize(1);
        assertThat(logs.text()).doesNotContain("__QUEUE_MODE__");
      }
    }
  }

  @Test
  void aFailedBatchIsNamedAsABatchNotAsItsFirstMessage(DataSource ds) {
    String q = "logs-batch";
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("log2").pollInterval(Duration.ofMillis(100))
        .start()) {
      queen.queue(q).partition("a").push(Map.of("n", 1));
      queen.queue(q).partition("a").push(Map.of("n", 2));
      queen.queue(q).partition("b").push(Map.of("n", 3));
      java.util.concurrent.atomic.AtomicBoolean failedOnce = new java.util.concurrent.atomic.AtomicBoolean();
      try (LogCapture logs = LogCapture.start();
          Subscription s = queen.queue(q).consumer().batch(10).partitions(2).consumeBatch(batch -> {
            if (batch.size() == 3 && failedOnce.compareAndSet(false, true)) {
              throw new IllegalStateException("boom");
            }
          })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 3);
        assertThat(failedOnce).isTrue();
        // the exception came from the batch handler: the line names the batch, not one message as the culprit
        assertThat(logs.linesWith("WARN", "failed on a batch of 3 messages from 2 partition(s), the first at partition"))
            .hasSize(1);
      }
    }
  }

  @Test
  void aDeadLetterMoveByAnExpiredLeaseIsLogged(DataSource ds) {
    String q = "logs-expired";
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("log2").start();
        LogCapture logs = LogCapture.start()) {
      queen.queue(q).configure(c -> c.retryLimit(0));
      queen.queue(q).partition("only").push(Map.of("a", 1));
      List<Message> got = queen.queue(q).group("g").subscription(io.queen.SubscriptionMode.ALL)
          .leaseTime(Duration.ofMillis(200)).pop();
      assertThat(got).hasSize(1); // and never acknowledged: its consumer "crashed"
      await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(100)).until(() -> {
        queen.queue(q).group("g").pop();
        return queen.deadLetters(q).group("g").count() == 1;
      });
      assertThat(logs.linesWith("WARN", "log2 - dead-lettered queue '" + q + "' group 'g' partition 'only' offset 0 after 1"
          + " attempt(s); last error: lease expired (owner log2)")).hasSize(1);
    }
  }

  @Test
  void anOutageIsOneWarningAndItsEndOneInfo(TestDatabase db) throws Exception {
    String q = "logs-outage";
    HikariDataSource pool = db.newDataSource(6);
    pool.setConnectionTimeout(500); // an outage should fail fast here, not after Hikari's 10 s
    try (Queen queen = EmbeddedQueen.builder().dataSource(pool).nodeId("log3").pollInterval(Duration.ofMillis(100))
        .janitor(false).start();
        Connection admin = db.server().adminConnection();
        Statement st = admin.createStatement()) {
      Set<String> handled = ConcurrentHashMap.newKeySet();
      try (Subscription s = queen.queue(q).consumer().concurrency(2).consume(m -> handled.add(m.payload().toString()))) {
        queen.queue(q).push(Map.of("n", 1));
        await().atMost(Duration.ofSeconds(10)).until(() -> handled.size() == 1);
        try (LogCapture logs = LogCapture.start()) {
          st.execute("alter database " + db.name() + " with allow_connections false");
          st.execute("select pg_terminate_backend(pid) from pg_stat_activity where datname = '" + db.name() + "'");
          await().atMost(Duration.ofSeconds(10)).until(() -> !logs.linesWith("WARN", "cannot pop").isEmpty()
              && !logs.linesWith("WARN", "wake-up listener lost its connection").isEmpty());
          Thread.sleep(1500); // the outage goes on: workers and listener keep retrying, quietly
          st.execute("alter database " + db.name() + " with allow_connections true");
          await().atMost(Duration.ofSeconds(15)).until(() -> !logs.linesWith("INFO", "recovered").isEmpty()
              && !logs.linesWith("INFO", "wake-up listener is back").isEmpty());
          queen.queue(q).push(Map.of("n", 2));
          await().atMost(Duration.ofSeconds(10)).until(() -> handled.size() == 2);
          assertThat(logs.linesWith("WARN", "consumer of queue '" + q + "' (default group) cannot pop")).hasSize(1);
          assertThat(logs.linesWith("INFO", "consumer of queue '" + q + "' (default group) recovered: pops work again after"))
              .hasSize(1);
          assertThat(logs.linesWith("WARN", "wake-up listener lost its connection")).hasSize(1);
          assertThat(logs.linesWith("INFO", "wake-up listener is back after")).hasSize(1);
        }
      } finally {
        st.execute("alter database " + db.name() + " with allow_connections true");
      }
    } finally {
      pool.close();
    }
  }
}
