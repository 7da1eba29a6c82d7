package io.queen.embedded.internal.ops;

import io.queen.Queen;
import io.queen.RetentionRun;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.internal.log.Metrics;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The janitor never waits for a pusher, yet does not leave a busy partition's backlog for the next pass: a partition
 * whose row a push holds when the walk comes by is tried again after the walk; one held through every try is
 * reported as {@code busy} and taken by the next pass.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RetentionBusyTest {

  /** Three partitions a, b, c of queue q with 1,200 messages each (more than two steps), all past retention. */
  private static void fill(Queen queen, DataSource ds) throws Exception {
    queen.queue("q").configure(c -> c.retention(Duration.ofDays(1)));
    for (String p : List.of("a", "b", "c")) {
      for (int i = 0; i < 1_200; i += 400) {
        List<Map<String, Integer>> batch = new ArrayList<>();
        for (int j = 0; j < 400; j++) {
          batch.add(Map.of("i", i + j));
        }
        queen.queue("q").partition(p).pushAll(batch);
      }
    }
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
        "update queen.messages m set created_at = m.created_at - interval '2 days' from queen.partitions p"
            + " join queen.queues q on q.id = p.queue_id where m.partition_id = p.id and q.name = 'q'")) {
      st.executeUpdate();
    }
  }

  private static long count(DataSource ds, String partition) throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select count(*)"
        + " from queen.messages m join queen.partitions p on p.id = m.partition_id where p.name = ?")) {
      st.setString(1, partition);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  /** Holds partition {@code name}'s row as a push does (FOR NO KEY UPDATE, in an open transaction). */
  private static Connection hold(DataSource ds, String name) throws Exception {
    Connection c = ds.getConnection();
    c.setAutoCommit(false);
    try (PreparedStatement st = c.prepareStatement(
        "select 1 from queen.partitions where name = ? for no key update")) {
      st.setString(1, name);
      st.executeQuery().close();
    }
    return c;
  }

  @Test
  void aPartitionHeldThroughEveryTryIsReportedBusyAndTakenByTheNextPass(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      fill(queen, ds);
      RetentionRun run;
      try (Connection held = hold(ds, "a")) {
        run = queen.runRetentionNow();
        held.rollback();
      }
      assertThat(run.ran()).isTrue();
      assertThat(run.removed()).isEqualTo(2_400);
      assertThat(run.busy()).isEqualTo(1);
      assertThat(count(ds, "a")).isEqualTo(1_200);
      assertThat(count(ds, "b")).isZero();
      assertThat(queen.status().queue("q").retention().oldestPartition()).isEqualTo("a");

      RetentionRun next = queen.runRetentionNow();
      assertThat(next.removed()).isEqualTo(1_200);
      assertThat(next.busy()).isZero();
      assertThat(count(ds, "a")).isZero();
    }
  }

  @Test
  void aPartitionReleasedAfterTheWalkIsDrainedInTheSamePass(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      fill(queen, ds);
      // long pauses before the rounds on busy partitions, so the release below surely lands inside one
      RetentionJanitor janitor = new RetentionJanitor("test", ds, "queen", Metrics.NOOP,
          java.time.Duration.ZERO, new long[] {2_000, 2_000});
      CompletableFuture<RetentionRun> pass;
      try (Connection held = hold(ds, "a")) {
        pass = CompletableFuture.supplyAsync(janitor::run);
        // "a" has the lowest id: the walk skipped it before it drained b and c
        Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(5))
            .until(() -> count(ds, "b") == 0 && count(ds, "c") == 0);
        assertThat(count(ds, "a")).isEqualTo(1_200);
        held.rollback();
      }
      RetentionRun run = pass.get(30, TimeUnit.SECONDS);
      assertThat(run.removed()).isEqualTo(3_600);
      assertThat(run.busy()).isZero();
      assertThat(count(ds, "a")).isZero();
    }
  }

  /**
   * A queue with many partitions of one old message each (a source connector's shape: a partition per row key) is
   * cleaned in chunks, one transaction for up to 100 partitions; partitions with more than a chunk's share, and one a
   * push holds, are handled one by one.
   */
  @Test
  void manyPartitionsOfOneOldMessageEachAreRemovedInChunks(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      queen.queue("wide").configure(c -> c.completedRetention(Duration.ofSeconds(1)));
      List<io.queen.PushItem> items = new ArrayList<>();
      for (int i = 0; i < 1_000; i++) {
        items.add(io.queen.PushItem.to("wide", "k" + i, Map.of("i", i)));
      }
      for (int i = 0; i < 300; i++) {
        items.add(io.queen.PushItem.to("wide", "k7", Map.of("more", i))); // one partition with 301 messages
      }
      queen.queue("wide").push(items);
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement(
          "update queen.messages m set created_at = m.created_at - interval '1 hour' from queen.partitions p"
              + " join queen.queues q on q.id = p.queue_id where m.partition_id = p.id and q.name = 'wide'")) {
        st.executeUpdate();
      }
      RetentionRun run;
      try (Connection held = hold(ds, "k500")) {
        run = queen.runRetentionNow();
        held.rollback();
      }
      assertThat(run.partitions()).isEqualTo(1_000);
      assertThat(run.removed()).isEqualTo(1_300 - 1);
      assertThat(run.busy()).isEqualTo(1);
      assertThat(count(ds, "k7")).isZero();
      assertThat(count(ds, "k500")).isEqualTo(1);
      assertThat(queen.runRetentionNow().removed()).isEqualTo(1);
      assertThat(count(ds, "k500")).isZero();
    }
  }

  /**
   * A queue deleted while a retention step holds one of its partitions (the step's lock order: the partition row, then
   * that partition's messages) waits for the step instead of deadlocking with it.
   */
  @Test
  void aQueueDeletedDuringARetentionStepWaitsForIt(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).janitor(false).start()) {
      fill(queen, ds);
      CompletableFuture<Void> delete;
      try (Connection step = hold(ds, "a")) {
        delete = CompletableFuture.runAsync(() -> queen.queue("q").delete());
        Awaitility.await().atMost(Duration.ofSeconds(20)).until(() -> waitingOnALock(ds));
        // what retention_step does next under the partition row: remove a prefix of that partition, without waiting
        // for the delete (which, taking the messages before the partitions, made this wait for it while it waited
        // for this: a deadlock that PostgreSQL broke after deadlock_timeout by aborting one of them)
        try (java.sql.Statement st = step.createStatement()) {
          st.execute("set local lock_timeout = '500ms'");
        }
        try (PreparedStatement st = step.prepareStatement("delete from queen.messages m using queen.partitions p"
            + " where p.name = 'a' and m.partition_id = p.id and m.\"offset\" < p.first_offset + 500")) {
          assertThat(st.executeUpdate()).isEqualTo(500);
        }
        step.commit();
      }
      delete.get(30, TimeUnit.SECONDS);
      assertThat(queen.status().queue("q")).isNull();
      assertThat(count(ds, "a") + count(ds, "b") + count(ds, "c")).isZero();
    }
  }

  private static boolean waitingOnALock(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select count(*)"
        + " from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'");
        ResultSet rs = st.executeQuery()) {
      rs.next();
      return rs.getLong(1) > 0;
    }
  }
}
