package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.AckStatus;
import io.queen.Json;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.RetentionRun;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Retention removes partitions that hold no message and have had no push for {@code removeEmptyPartitionsAfter},
 * with their cursors; a push that names one later creates it anew. The idle time is set by backdating
 * {@code last_message_at} (the shortest setting is a minute). Then the race the push paths must survive: a removal
 * committed between a push's look-up of the partition and its lock on it, for each of the three push functions and
 * for a transaction bundle.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RemoveEmptyPartitionsTest {

  private static Queen start(DataSource ds, String schema) {
    return EmbeddedQueen.builder().dataSource(ds).schema(schema).janitor(false).listen(false)
        .removeEmptyPartitionsAfter(Duration.ofHours(1)).start();
  }

  @Test
  void emptyIdlePartitionsGoWithTheirCursorsAndComeBackOnTheNextPush(DataSource ds) throws Exception {
    String s = "rmempty";
    try (Queen queen = start(ds, s)) {
      String q = "orders";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(1)).retryLimit(0));
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        items.add(PushItem.to(q, "order-" + i, Json.of("{\"n\":" + i + "}")));
      }
      queen.push(items);
      // group "billing" completes every message but the one of order-9, which it dead-letters
      List<Message> got = queen.queue(q).group("billing").subscription(io.queen.SubscriptionMode.ALL).batch(10).partitions(10).pop();
      assertThat(got).hasSize(10);
      for (Message m : got) {
        queen.ack(m, m.partition().equals("order-9") ? AckStatus.DEAD_LETTER : AckStatus.COMPLETED, "bad order");
      }
      exec(ds, "update " + s + ".messages set created_at = now() - interval '2 days'");

      // retention removes the messages; the partitions had a push a moment ago, so they stay
      RetentionRun first = queen.runRetentionNow();
      assertThat(first.removed()).isEqualTo(10);
      assertThat(first.emptyPartitionsRemoved()).isZero();
      assertThat(partitions(ds, s)).hasSize(10);

      // two hours without a push: every empty partition goes, order-9 too (its dead letter went with its message), but
      // order-8 (a lease, as a consumer that holds one on an emptied partition would) and order-7 (a push in flight
      // holds its row)
      exec(ds, "update " + s + ".partitions set last_message_at = now() - interval '2 hours'");
      exec(ds, "update " + s + ".cursors c set lease_id = gen_random_uuid(), lease_owner = 'x', lease_expires_at ="
          + " now() + interval '1 hour' from " + s + ".partitions p where p.id = c.partition_id and p.name = 'order-8'");
      try (Connection pusher = ds.getConnection()) {
        pusher.setAutoCommit(false);
        try (Statement st = pusher.createStatement()) {
          st.execute("select 1 from " + s + ".partitions where name = 'order-7' for no key update");
        }
        RetentionRun second = queen.runRetentionNow();
        assertThat(second.emptyPartitionsRemoved()).isEqualTo(8);
        pusher.rollback();
      }
      assertThat(partitions(ds, s)).containsExactly("order-7", "order-8");
      assertThat(count(ds, "select count(*) from " + s + ".cursors")).isEqualTo(2);
      assertThat(queen.status().queue(q).partitions()).isEqualTo(2);

      // a push to a removed partition creates it anew: offset 0, and the group's cursor at its start
      PushResult again = queen.queue(q).partition("order-1").push(Json.of("{\"n\":100}"));
      assertThat(again.status()).isEqualTo(PushStatus.QUEUED);
      assertThat(again.offset()).isZero();
      List<Message> next = queen.queue(q).group("billing").batch(10).partitions(10).pop();
      assertThat(next).extracting(Message::partition, Message::offset)
          .containsExactly(org.assertj.core.groups.Tuple.tuple("order-1", 0L));
      queen.ack(next);
    }
  }

  @Test
  void aRemovalBetweenAPushsLookUpAndItsLockMakesThePushCreateThePartitionAnew(DataSource ds) throws Exception {
    String s = "rmrace";
    try (Queen queen = start(ds, s)) {
      String q = "jobs";
      queen.queue(q).configure(c -> c.retention(Duration.ofDays(1)));
      // push_partition (one partition, generated ids), push_fast (several partitions), push (caller transaction ids),
      // and a transaction bundle
      race(ds, queen, s, q, "one", "%push_partition(%",
          qn -> queen.push(List.of(PushItem.to(qn, "one", Json.of("{}")))));
      race(ds, queen, s, q, "many", "%push_fast(%",
          qn -> queen.push(List.of(PushItem.to(qn, "many", Json.of("{}")), PushItem.to(qn, "other", Json.of("{}")))));
      race(ds, queen, s, q, "mine", "%.push(%",
          qn -> queen.push(List.of(PushItem.to(qn, "mine", Json.of("{}")).transactionId("t-1"))));
      race(ds, queen, s, q, "bundled", "%.push(%", qn -> {
        queen.transaction().push(qn, "bundled", Json.of("{}")).commit();
        return List.of();
      });
    }
  }

  /**
   * Makes {@code partition} exist, empty and idle; removes it in a transaction left open; runs {@code push} until it
   * waits for that removal's lock; commits the removal; then the push must have stored its item once, at offset 0 of
   * the partition made anew.
   */
  private static void race(DataSource ds, Queen queen, String s, String q, String partition, String waitsLike,
      Function<String, List<PushResult>> push) throws Exception {
    queen.push(List.of(PushItem.to(q, partition, Json.of("{}")), PushItem.to(q, "other", Json.of("{}"))));
    exec(ds, "delete from " + s + ".messages");
    exec(ds, "update " + s + ".partitions set first_offset = next_offset, last_message_at = now() - interval '2 hours'");
    long old = id(ds, s, partition);
    try (Connection janitor = ds.getConnection()) {
      janitor.setAutoCommit(false);
      try (PreparedStatement st = janitor.prepareStatement("select * from " + s + ".remove_empty_partitions(?, ?)")) {
        st.setArray(1, janitor.createArrayOf("bigint", new Object[] {old}));
        st.setLong(2, Duration.ofHours(1).toMillis());
        st.executeQuery().close();
      }
      CompletableFuture<List<PushResult>> pushed = CompletableFuture.supplyAsync(() -> push.apply(q));
      LockWaiters.awaitWaiting(ds, waitsLike, 1, pushed::isDone);
      assertThat(pushed).as(partition + ": the push waits for the removal").isNotDone();
      janitor.commit();
      pushed.get(30, TimeUnit.SECONDS).forEach(r -> assertThat(r.status()).isEqualTo(PushStatus.QUEUED));
    }
    long now = id(ds, s, partition);
    assertThat(now).as(partition + ": a new partition").isNotEqualTo(old);
    assertThat(count(ds, "select count(*) from " + s + ".messages where partition_id = " + now)).isEqualTo(1);
    assertThat(count(ds, "select min(\"offset\") from " + s + ".messages where partition_id = " + now)).isZero();
    assertThat(count(ds, "select next_offset from " + s + ".partitions where id = " + now)).isEqualTo(1);
  }

  private static long id(DataSource ds, String s, String partition) throws Exception {
    return count(ds, "select id from " + s + ".partitions where name = '" + partition + "'");
  }

  private static List<String> partitions(DataSource ds, String s) throws Exception {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select name from " + s + ".partitions order by name")) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  private static long count(DataSource ds, String sql) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private static void exec(DataSource ds, String sql) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }
}
