package io.queen.embedded.internal.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Queen;
import io.queen.Status;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The group gauges (every node, every 10 s) and {@code status()} read the cursors that have work, never every cursor,
 * whatever the statistics say. Here a queue of 20,000 partitions had every cursor behind when it was analyzed, and
 * then all but 10 caught up: the planner, believing nearly every cursor flagged, chose a sequential scan of the whole
 * cursors table for the lag and for the leased count, a read that grows with every partition the queue ever had. The
 * reads run on the test's own connection, in one transaction each, and the table's scans are counted for that
 * transaction ({@code pg_stat_xact_user_tables}).
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StatusPlansTest {
  private static final String S = "plans";
  private static final int PARTITIONS = 20_000;

  @Test
  void lagAndStatusReadTheCursorsWithWorkWhateverTheStatisticsSay(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema(S).janitor(false).listen(false).start()) {
      queen.queue("wide").configure(c -> c.leaseTime(java.time.Duration.ofMinutes(5)));
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute("alter table " + S + ".cursors set (autovacuum_enabled = false)");
        st.execute("insert into " + S + ".partitions(queue_id, name, next_offset) select q.id, 'p' || g, 1"
            + " from " + S + ".queues q, generate_series(1, " + PARTITIONS + ") g where q.name = 'wide'");
        st.execute("insert into " + S + ".messages(partition_id, \"offset\", id, payload)"
            + " select p.id, 0, gen_random_uuid(), '{}'::jsonb from " + S + ".partitions p");
        st.execute("insert into " + S + ".consumer_groups(queue_id, name, mode) select id, 'g', 'ALL' from "
            + S + ".queues where name = 'wide'");
        st.execute("insert into " + S + ".cursors(partition_id, group_name, queue_id, committed_offset, has_pending)"
            + " select p.id, 'g', p.queue_id, -1, true from " + S + ".partitions p");
        st.execute("analyze " + S + ".cursors");
        // all but 10 caught up since, not analyzed again
        st.execute("update " + S + ".cursors set committed_offset = 0, has_pending = false where partition_id not in"
            + " (select id from " + S + ".partitions order by id limit 10)");
      }
      // two of the 10 leased by a pop of the group
      assertThat(queen.queue("wide").group("g").batch(2).partitions(2).pop()).hasSize(2);

      StatusReader reader = new StatusReader(ds, S, java.util.Set.of());
      try (Connection c = ds.getConnection()) {
        clearPendingStatistics(c);
        c.setAutoCommit(false);
        List<StatusReader.GroupLag> lag = reader.lag(c);
        assertThat(lag).singleElement().satisfies(g -> assertThat(g.lag()).isEqualTo(10));
        assertThat(cursorScans(c)[0]).as("the lag read: sequential scans of cursors").isZero();
        c.commit();

        clearPendingStatistics(c);
        c.setAutoCommit(false);
        Status status = reader.read(c);
        Status.QueueStatus wide = status.queue("wide");
        assertThat(wide.partitions()).isEqualTo(PARTITIONS);
        assertThat(wide.messages()).isEqualTo(PARTITIONS);
        Status.GroupStatus g = wide.group("g");
        assertThat(g.lag()).isEqualTo(10);
        assertThat(g.leases()).isEqualTo(2);
        assertThat(cursorScans(c)[0]).as("status(): sequential scans of cursors").isZero();
        c.commit();
      }
    }
  }

  /**
   * Flushes this backend's pending statistics. The {@code pg_stat_xact_*} views show what the backend has not flushed
   * yet, which since PostgreSQL 15 includes earlier transactions of the last second or so: a pooled connection that
   * ran this test's set-up (sequential scans of {@code cursors}) would show those too. A forced flush happens when the
   * backend next goes idle, right after this statement in auto-commit.
   */
  private static void clearPendingStatistics(Connection c) throws Exception {
    c.setAutoCommit(true);
    try (Statement st = c.createStatement()) {
      st.execute("select pg_stat_force_next_flush()");
    }
  }

  /** Sequential and index scans of {@code cursors} in the connection's transaction so far. */
  private static long[] cursorScans(Connection c) throws Exception {
    try (PreparedStatement st = c.prepareStatement("select seq_scan, idx_scan from pg_stat_xact_user_tables"
        + " where schemaname = ? and relname = 'cursors'")) {
      st.setString(1, S);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return new long[] {rs.getLong(1), rs.getLong(2)};
      }
    }
  }
}
