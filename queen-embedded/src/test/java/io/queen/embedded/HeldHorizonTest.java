package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.AckOutcome;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * While a transaction holds the xmin horizon, none of the versions a cursor or partition row gets can be pruned,
 * and a look-up by key fetches every one its index entries point to. The hot look-ups of pop, ack and push read a
 * key's entries newest first and stop at the version they can see, the rows they lock are written through their ctid,
 * and the two tables leave room on their pages for the versions (a version that must go to another page adds entries
 * to every index, and its unique check walks them). Here one partition goes through push, pop and ack rounds under a
 * held horizon; the buffers a round of the functions the API calls reads (EXPLAIN's count, which includes the
 * statements the functions run) are measured after 200 rounds and after 2,000: a look-up by key reads many times more
 * by then, a round does not. Buffers are counted, not timed, so the bound holds on any machine. Before the second
 * measurement the two tables are analyzed, as autovacuum does meanwhile (it keeps visiting tables whose dead versions it
 * may not remove): statistics that count one cursor and one partition must not turn the plans either.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HeldHorizonTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void aRoundOfPushPopAndAckReadsNoMoreAsTheHeldVersionsPileUp(DataSource ds) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(ds).schema("held").janitor(false).listen(false).start();
        Connection holder = ds.getConnection(); Connection probe = ds.getConnection()) {
      long offset = rounds(queen, 0, 1); // the partition and the group's cursor

      holder.setAutoCommit(false);
      try (Statement st = holder.createStatement()) {
        st.execute("set transaction isolation level repeatable read");
        st.executeQuery("select count(*) from held.cursors").close(); // the snapshot that holds the horizon
      }
      offset = rounds(queen, offset, 200);
      long walkBefore = walk(probe);
      Medians before = measured(probe, offset, 21);
      offset = rounds(queen, before.next(), 1_800);
      try (Statement st = probe.createStatement()) {
        st.execute("analyze held.cursors, held.partitions"); // as autovacuum does meanwhile
      }
      long walkAfter = walk(probe);
      Medians after = measured(probe, offset, 21);
      holder.rollback();

      // the versions piled up: a look-up by key reads many times more than it did
      assertThat(walkAfter).as("buffers a look-up by key reads after 2,000 rounds, against %d after 200", walkBefore)
          .isGreaterThan(5 * walkBefore);
      // a pop of the named partition and an ack do not (the median of 21: about one call in twenty writes a version
      // to another page, and that version's unique check walks the key's entries)
      assertThat(after.pop()).as("buffers of a pop after 2,000 rounds, against %d after 200", before.pop())
          .isLessThan(before.pop() + 10);
      assertThat(after.ack()).as("buffers of an ack after 2,000 rounds, against %d after 200", before.ack())
          .isLessThan(2 * before.ack() + 10);
    }
  }

  /** Pushes, pops and acks {@code n} messages one at a time through the API, from {@code offset}; the next offset. */
  private static long rounds(Queen queen, long offset, int n) {
    for (int i = 0; i < n; i++, offset++) {
      queen.queue("jobs").push(PushItem.of("p", Map.of("n", offset)));
      List<Message> got = queen.queue("jobs").group("g").subscription(SubscriptionMode.ALL).pop();
      assertThat(got).extracting(Message::offset).containsExactly(offset);
      assertThat(queen.ack(got)).extracting(r -> r.outcome()).containsExactly(AckOutcome.ACKED);
    }
    return offset;
  }

  /** Buffers a look-up of the group's cursor by key reads (oldest index entry first, every version it meets). */
  private static long walk(Connection probe) throws Exception {
    return buffers(probe, "select * from held.cursors where group_name = 'g'"
        + " and partition_id = (select id from held.partitions where name = 'p')");
  }

  /** The median buffers of the measured pops and acks, and the offset the next push gets. */
  private record Medians(long pop, long ack, long next) {}

  /**
   * {@code n} rounds of the functions the API calls (push, pop of the named partition, ack), each under EXPLAIN, after
   * one round unmeasured (it plans the functions' statements on this connection). Each round checks that the pop
   * leased the message pushed and that the ack settled it.
   */
  private static Medians measured(Connection probe, long offset, int n) throws Exception {
    long[] pops = new long[n];
    long[] acks = new long[n];
    for (int round = 0; round <= n; round++, offset++) {
      long push = buffers(probe, "select * from held.push_partition('jobs', 'p', array[gen_random_uuid()],"
          + " array['{\"n\": 1}'], array[null]::text[], array[null]::text[])");
      long pop = buffers(probe, "select * from held.pop('jobs', 'g', 1, 1, null, null, 'probe', 'ALL', null,"
          + " false, null, array['p'])");
      Cursor leased = cursor(probe);
      assertThat(leased.leaseTo()).as("the measured pop leased the message pushed").isEqualTo(offset);
      String lease = leased.lease();
      long ack = buffers(probe, "select * from held.ack(array[(select id from held.partitions where name = 'p')],"
          + " array['g'], array[" + offset + "::bigint], array['" + lease + "'::uuid], array['COMPLETED'],"
          + " array[null]::text[], true)");
      Cursor settled = cursor(probe);
      assertThat(settled.committed()).as("the measured ack settled the lease").isEqualTo(offset);
      assertThat(settled.lease()).isNull();
      if (round > 0) {
        pops[round - 1] = pop;
        acks[round - 1] = ack;
      }
    }
    return new Medians(median(pops), median(acks), offset);
  }

  /** The group's cursor on partition p: its position, the leased range's end and the lease. */
  private record Cursor(long committed, long leaseTo, String lease) {}

  private static Cursor cursor(Connection probe) throws Exception {
    try (Statement st = probe.createStatement(); ResultSet rs = st.executeQuery(
        "select cu.committed_offset, cu.lease_to, cu.lease_id from held.cursors cu join held.partitions p"
            + " on p.id = cu.partition_id where p.name = 'p' and cu.group_name = 'g'")) {
      assertThat(rs.next()).isTrue();
      return new Cursor(rs.getLong(1), rs.getLong(2), rs.getString(3));
    }
  }

  private static long median(long[] values) {
    long[] sorted = values.clone();
    Arrays.sort(sorted);
    return sorted[sorted.length / 2];
  }

  /** Shared buffers (hit or read) a statement and everything it ran read, from EXPLAIN (ANALYZE, BUFFERS). */
  private static long buffers(Connection c, String sql) throws Exception {
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("explain (analyze, buffers, timing off, format json) " + sql)) {
      rs.next();
      JsonNode plan = JSON.readTree(rs.getString(1)).get(0).get("Plan");
      return plan.get("Shared Hit Blocks").asLong() + plan.get("Shared Read Blocks").asLong();
    }
  }
}
