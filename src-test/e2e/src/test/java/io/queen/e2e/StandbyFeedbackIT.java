package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.internal.ops.HorizonWatch;
import io.queen.testkit.LogCapture;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A transaction on a standby with {@code hot_standby_feedback} holds the primary's xmin horizon through the standby's
 * physical slot: the node names the slot once past {@code horizonWarnAfter}, and says when the transaction ended.
 */
class StandbyFeedbackIT {

  @Test
  @Timeout(value = 180, unit = TimeUnit.SECONDS)
  void aTransactionOnAStandbyIsNamedByItsSlotAndItsEndSaid() throws Exception {
    try (StandbyPair pair = StandbyPair.start();
        Queen queen = EmbeddedQueen.builder().jdbcUrl(pair.url(), "postgres", "postgres")
            .horizonWarnAfter(Duration.ofSeconds(1)).start();
        LogCapture logs = LogCapture.start()) {
      // a watch of the test's own, run when the test wants, beside the node's janitor: its lines carry this thread
      HorizonWatch watch = new HorizonWatch(E2e.internals(queen).nodeId(), E2e.internals(queen).broker().dataSource(),
          E2e.internals(queen).metrics(), Duration.ofSeconds(1));
      String here = "[" + Thread.currentThread().getName() + "]";
      queen.queue("h").push(Map.of("i", 0));
      try (Connection standby = StandbyPair.connect(pair.standbyPort())) {
        standby.setAutoCommit(false);
        try (Statement st = standby.createStatement()) {
          st.execute("set transaction isolation level repeatable read");
          try (ResultSet rs = st.executeQuery("select count(*) from queen.messages")) {
            rs.next(); // the snapshot is taken: the standby reports its xmin to the primary's slot
          }
        }
        String warn = "the hot_standby_feedback of physical slot '" + StandbyPair.STANDBY_SLOT + "'";
        Awaitility.await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(300)).pollInSameThread()
            .until(() -> {
          queen.queue("h").push(Map.of("i", 1)); // transactions newer than the standby's snapshot
          watch.run();
          return !logs.linesWith(here, "WARN", "has held the database's xmin horizon", warn).isEmpty();
        });
        watch.run();
        assertThat(logs.linesWith(here, "WARN", "has held the database's xmin horizon", warn)).hasSize(1);
        standby.commit();
      }
      Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(300)).pollInSameThread()
            .until(() -> {
        queen.queue("h").push(Map.of("i", 2));
        watch.run();
        return !logs.linesWith(here, "INFO", "the transaction that held the xmin horizon (the hot_standby_feedback of"
            + " physical slot '" + StandbyPair.STANDBY_SLOT + "'", "no longer does").isEmpty();
      });
      assertThat(StandbyPair.query(pair.primaryPort(), "select count(*) from pg_replication_slots where xmin is not null"
          + " and slot_name = '" + StandbyPair.STANDBY_SLOT + "'")).isEqualTo(List.of("1"));
    }
  }
}
