package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A lease held across a restart of PostgreSQL and expired meanwhile counts no attempt: its holder
 * could not ack while the server was down. With {@code retryLimit(0)} a counted expiry sends the message to the
 * dead-letter queue at once, which is what an outage longer than the lease did before. A lease that simply expires,
 * with no restart, still counts. A server of this test's own (the shared one cannot be restarted).
 */
class LeaseAcrossRestartIT {

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void aLeaseThatSpannedARestartIsGivenBackWithoutAnAttempt() throws Exception {
    Path dir = Files.createTempDirectory("queen-lease-restart-");
    int port = OwnServer.freePort();
    EmbeddedPostgres pg = OwnServer.start(dir, port);
    try (Queen queen = EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://localhost:" + port + "/postgres",
        "postgres", "postgres").nodeId("lease-restart").connectTimeout(Duration.ofSeconds(1)).start()) {
      String q = "jobs";
      queen.queue(q).configure(c -> c.leaseTime(Duration.ofSeconds(2)).retryLimit(0));
      queen.queue(q).partition("across").push(Map.of("job", 1));
      queen.queue(q).partition("plain").push(Map.of("job", 2));

      // a lease taken, then the server down for longer than the lease
      assertThat(queen.queue(q).consumer().partition("across").pop()).hasSize(1);
      pg.close();
      Thread.sleep(3_000); // the outage: the lease (2 s) runs out while the server is down
      pg = OwnServer.start(dir, port);
      AtomicReference<List<Message>> again = new AtomicReference<>();
      await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200)).ignoreExceptions()
          .until(() -> {
            again.set(queen.queue(q).consumer().partition("across").pop());
            return !again.get().isEmpty();
          });
      assertThat(again.get()).singleElement().satisfies(m -> assertThat(m.attempt()).as("attempt").isEqualTo(1));
      assertThat(queen.deadLetters(q).defaultGroup().count()).isZero();
      queen.ack(again.get().get(0));

      // a lease that expires with the server up counts, as before: retryLimit 0 dead-letters it at the next pop
      assertThat(queen.queue(q).consumer().partition("plain").pop()).hasSize(1);
      await().pollDelay(Duration.ofMillis(2_200)).atMost(Duration.ofSeconds(10)).until(() -> {
        List<Message> m = queen.queue(q).consumer().partition("plain").pop();
        return m.isEmpty() && queen.deadLetters(q).defaultGroup().count() == 1;
      });
    } finally {
      pg.close();
    }
  }
}
