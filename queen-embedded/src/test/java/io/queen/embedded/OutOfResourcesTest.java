package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Kv;
import io.queen.Message;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The server short of something that comes back (SQLState class 53: a full disk, no free connection; 57014: a
 * statement canceled) is the database's trouble, never the message's: a push retries it, and a transactional
 * handler's commit that fails on it gives the lease back without an attempt, however long the database takes to
 * answer within the lease, and so does a plain handler's ack. Provoked for real: a role whose connection limit is set to 0 for a moment, so every new
 * connection of Queen's (a plain pgjdbc DataSource opens one per call) is refused with 53300, as when the server's
 * {@code max_connections} is used up. Found by a campaign that filled the disk under a consume loop: 9 messages
 * went to the dead-letter queue, their attempts spent within 250 ms.
 */
@QueenPostgres
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class OutOfResourcesTest {
  private static final String ROLE = "queen_limited";
  private TestDatabase db;
  private PGSimpleDataSource ds;
  private volatile CompletableFuture<Void> window = CompletableFuture.completedFuture(null);

  @BeforeAll
  void role(TestDatabase db) throws SQLException {
    this.db = db;
    admin("create role " + ROLE + " login password 'limited'", "grant create, connect on database " + db.name()
        + " to " + ROLE);
    ds = new PGSimpleDataSource();
    ds.setUrl(db.jdbcUrl());
    ds.setUser(ROLE);
    ds.setPassword("limited");
  }

  @AfterEach
  void endWindow() throws Exception {
    window.get(10, TimeUnit.SECONDS);
  }

  @AfterAll
  void dropRole() throws SQLException {
    admin("drop owned by " + ROLE, "drop role " + ROLE);
  }

  private void admin(String... sql) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : sql) {
        st.execute(s);
      }
    }
  }

  /** New connections of the role are refused (53300) from now until {@code millis} later. */
  private CompletableFuture<Void> refuseConnectionsFor(long millis) throws SQLException {
    admin("alter role " + ROLE + " connection limit 0");
    return window = CompletableFuture.runAsync(() -> {
      try {
        Thread.sleep(millis);
        admin("alter role " + ROLE + " connection limit -1");
      } catch (InterruptedException | SQLException e) {
        throw new IllegalStateException(e);
      }
    });
  }

  @Test
  void aCommitRefusedForWantOfConnectionsCostsTheMessageNoAttempt() throws Exception {
    AtomicBoolean first = new AtomicBoolean(true);
    try (LogCapture logs = LogCapture.start();
        Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("limited-1").pollInterval(Duration.ofMillis(100))
            .start()) {
      // no retries: a message blamed once goes to the dead-letter queue at once
      queen.queue("jobs").configure(c -> c.retryLimit(0).leaseTime(Duration.ofSeconds(20)));
      queen.queue("jobs").partition("p").push(Map.of("job", 1));
      try (Subscription s = queen.queue("jobs").group("g").subscription(SubscriptionMode.ALL)
          .consumeInTransaction((m, tx) -> {
        if (first.getAndSet(false)) {
          try {
            refuseConnectionsFor(2_000); // the commit, and the give-back after it, get no connection
          } catch (SQLException e) {
            throw new IllegalStateException(e);
          }
        }
        tx.once("done", m.stateKey("job"), Kv.ttl(Duration.ofHours(1)).required())
            .push("effects", m.partition(), Map.of("job", m.payload().get("job").asInt()));
      })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 1);
        window.get(10, TimeUnit.SECONDS);
        assertThat(s.failed()).as("a commit refused by the server is not the handler's failure").isZero();
        assertThat(s.deadLettered()).isZero();
        assertThat(logs.linesWith("WARN", "commit of a bundle", "53300")).isNotEmpty();
        assertThat(logs.linesWith("gave back 1 lease(s)", "after")).hasSize(1);
      }
      assertThat(queen.deadLetters("jobs").group("g").count()).isZero();
      List<Message> effects = queen.queue("effects").consumer().batch(10).autoAck(true).pop();
      assertThat(effects).hasSize(1);
      assertThat(queen.status().queue("jobs").messages()).isEqualTo(1);
    }
  }

  @Test
  void anAckRefusedForWantOfConnectionsIsSentAgainAndCostsNoAttempt() throws Exception {
    AtomicBoolean first = new AtomicBoolean(true);
    try (LogCapture logs = LogCapture.start();
        Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("limited-3").pollInterval(Duration.ofMillis(100))
            .start()) {
      queen.queue("mails").configure(c -> c.retryLimit(0).leaseTime(Duration.ofSeconds(20)));
      queen.queue("mails").partition("p").push(Map.of("mail", 1));
      try (Subscription s = queen.queue("mails").group("g").subscription(SubscriptionMode.ALL).consume(m -> {
        if (first.getAndSet(false)) {
          try {
            refuseConnectionsFor(2_000); // the handler succeeds; its ack gets no connection for a while
          } catch (SQLException e) {
            throw new IllegalStateException(e);
          }
        }
      })) {
        await().atMost(Duration.ofSeconds(30)).until(() -> s.acked() == 1);
        window.get(10, TimeUnit.SECONDS);
        assertThat(s.handled()).as("not redelivered").isEqualTo(1);
        assertThat(s.failed()).isZero();
        assertThat(logs.linesWith("acknowledged 1 message(s) after")).hasSize(1);
      }
      assertThat(queen.deadLetters("mails").group("g").count()).isZero();
    }
  }

  @Test
  void aPushRefusedForWantOfConnectionsIsRetriedAndStoredOnce() throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).nodeId("limited-2").connectTimeout(Duration.ofSeconds(10))
        .start()) {
      refuseConnectionsFor(1_500);
      long t0 = System.nanoTime();
      PushResult r = queen.queue("orders").partition("o").push(Map.of("order", 7));
      long tookMs = (System.nanoTime() - t0) / 1_000_000;
      window.get(10, TimeUnit.SECONDS);
      assertThat(r.status()).isEqualTo(PushStatus.QUEUED);
      assertThat(tookMs).as("the push waited for the connections to come back").isGreaterThanOrEqualTo(1_000);
      assertThat(queen.queue("orders").consumer().batch(10).autoAck(true).pop()).hasSize(1);
    }
  }
}
