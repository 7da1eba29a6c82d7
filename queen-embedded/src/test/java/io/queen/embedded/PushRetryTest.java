package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.queen.CommitResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushOutcomeUnknownException;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.SubscriptionMode;
import io.queen.testkit.QueenPostgres;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Every pushed item carries a transaction id (generated when the caller gives none), and a push whose
 * connection is lost is retried by Queen so that it ends stored exactly once.
 */
@QueenPostgres
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PushRetryTest {
  private static final String UUID_V7 = "[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";

  private DataSource ds;
  private Queen queen;
  private String q;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("t1").start();
    q = "r-" + info.getTestMethod().orElseThrow().getName().substring(0, 12);
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  private static Map<String, Object> body(int seq) {
    return Map.of("seq", seq);
  }

  @Test
  void generatedTransactionIdsArePresentUniqueAndTimeOrdered() {
    long before = System.currentTimeMillis();
    List<PushResult> all = new ArrayList<>();
    all.add(queen.queue(q).partition("a").push(body(0))); // a new partition: the full push
    List<Object> many = new ArrayList<>();
    for (int i = 1; i < 100; i++) {
      many.add(body(i));
    }
    all.addAll(queen.queue(q).partition("a").pushAll(many)); // push_fast
    for (int i = 100; i < 150; i++) {
      all.add(queen.queue(q).partition(i % 2 == 0 ? "a" : "b").push(body(i)));
    }
    CommitResult bundle = queen.transaction().push(q, "a", body(150)).commit();
    assertThat(bundle.success()).isTrue();
    all.addAll(bundle.pushes());
    long after = System.currentTimeMillis();

    Set<String> seen = new HashSet<>();
    String previous = "";
    for (PushResult r : all) {
      assertThat(r.status()).isEqualTo(PushStatus.QUEUED);
      assertThat(r.transactionId()).matches(UUID_V7).isEqualTo(r.messageId().toString());
      assertThat(seen.add(r.transactionId())).as("unique").isTrue();
      assertThat(r.transactionId()).as("time-ordered").isGreaterThan(previous);
      previous = r.transactionId();
      long millis = r.messageId().getMostSignificantBits() >>> 16;
      assertThat(millis).isBetween(before, after + 5); // up to 4096 ids a millisecond may carry into the next one
    }

    Map<UUID, String> byId = new HashMap<>();
    List<Message> got = queen.queue(q).group("check").subscription(SubscriptionMode.ALL).batch(1000).partitions(2).pop();
    got.forEach(m -> byId.put(m.id(), m.transactionId()));
    assertThat(byId).hasSize(all.size());
    for (PushResult r : all) {
      assertThat(byId.get(r.messageId())).isEqualTo(r.transactionId());
    }
  }

  @Test
  void aCallersOwnTransactionIdStaysDeduplicated() {
    PushResult first = queen.queue(q).push(List.of(PushItem.of("p", body(1)).transactionId("t-1"))).get(0);
    List<PushResult> again = queen.queue(q).push(List.of(PushItem.of("p", body(2)).transactionId("t-1"),
        PushItem.of("p", body(3)), PushItem.of("p", body(4)).transactionId("t-2"), PushItem.of("p", body(5)).transactionId("t-2")));
    assertThat(again.get(0).status()).isEqualTo(PushStatus.DUPLICATE);
    assertThat(again.get(0).messageId()).isEqualTo(first.messageId());
    assertThat(again.get(0).offset()).isEqualTo(first.offset());
    assertThat(again.get(0).transactionId()).isEqualTo("t-1");
    assertThat(again.get(1).status()).isEqualTo(PushStatus.QUEUED);
    assertThat(again.get(1).transactionId()).matches(UUID_V7);
    assertThat(again.get(2).status()).isEqualTo(PushStatus.QUEUED);
    assertThat(again.get(3).status()).isEqualTo(PushStatus.DUPLICATE); // within the batch
    assertThat(again.get(3).messageId()).isEqualTo(again.get(2).messageId());
    assertThat(storedSeqs(q)).containsExactlyInAnyOrderEntriesOf(Map.of(1, 1, 3, 1, 4, 1));
  }

  @Test
  void aPushWhoseBackendIsTerminatedWhileItWaitsIsRetriedAndStoredOnce() throws Exception {
    queen.queue(q).partition("p").push(body(0)); // the partition exists: the retried push is push_fast's
    List<PushResult> rs = pushWhileTerminated(() -> queen.queue(q).partition("p").pushAll(List.of(body(1), body(2))));
    assertThat(rs).extracting(PushResult::status).containsOnly(PushStatus.QUEUED);
    assertThat(rs).extracting(PushResult::offset).containsExactly(1L, 2L);
    assertThat(storedSeqs(q)).containsExactlyInAnyOrderEntriesOf(Map.of(0, 1, 1, 1, 2, 1));
    assertStoredAsReported(rs);
  }

  @Test
  void aTerminatedPushWithCallerIdsKeepsTheEarlierDuplicateDuplicate() throws Exception {
    PushResult old = queen.queue(q).push(List.of(PushItem.of("p", body(0)).transactionId("old"))).get(0);
    List<PushResult> rs = pushWhileTerminated(() -> queen.queue(q).push(List.of(PushItem.of("p", body(1)).transactionId("old"),
        PushItem.of("p", body(2)).transactionId("mine"), PushItem.of("p", body(3)))));
    assertThat(rs).extracting(PushResult::status).containsExactly(PushStatus.DUPLICATE, PushStatus.QUEUED, PushStatus.QUEUED);
    assertThat(rs.get(0).messageId()).isEqualTo(old.messageId());
    assertThat(storedSeqs(q)).containsExactlyInAnyOrderEntriesOf(Map.of(0, 1, 2, 1, 3, 1));
    assertStoredAsReported(rs.subList(1, 3));
  }

  /**
   * Runs {@code push} while another connection holds its partition row, terminates the push's backend while it waits
   * for that lock, waits until the retry waits for the lock too, and lets it go.
   */
  private List<PushResult> pushWhileTerminated(java.util.function.Supplier<List<PushResult>> push) throws Exception {
    try (Connection locker = ds.getConnection(); Connection admin = ds.getConnection()) {
      locker.setAutoCommit(false);
      try (PreparedStatement st = locker.prepareStatement("select p.id from queen.partitions p join queen.queues qq"
          + " on qq.id = p.queue_id where qq.name = ? and p.name = 'p' for update of p")) {
        st.setString(1, q);
        st.executeQuery().close();
      }
      CompletableFuture<List<PushResult>> f = CompletableFuture.supplyAsync(push);
      int victim = awaitBlockedPusher(admin, -1);
      try (PreparedStatement st = admin.prepareStatement("select pg_terminate_backend(?)")) {
        st.setInt(1, victim);
        st.executeQuery().close();
      }
      awaitBlockedPusher(admin, victim); // the retry, on another connection, waits for the same row
      assertThat(f).isNotDone();
      locker.commit();
      return f.get(30, TimeUnit.SECONDS);
    }
  }

  private static int awaitBlockedPusher(Connection admin, int not) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (System.nanoTime() < deadline) {
      try (PreparedStatement st = admin.prepareStatement("select pid from pg_stat_activity where datname = current_database()"
          + " and pid <> pg_backend_pid() and pid <> ? and wait_event_type = 'Lock' and query like '%.push%'")) {
        st.setInt(1, not);
        try (ResultSet rs = st.executeQuery()) {
          if (rs.next()) {
            return rs.getInt(1);
          }
        }
      }
      Thread.sleep(10);
    }
    throw new AssertionError("no push waited for the partition lock within 20 s");
  }

  @Test
  void aReplyLostAfterTheCommitIsReportedAsQueuedOnce() {
    AtomicInteger lose = new AtomicInteger();
    try (Queen flaky = EmbeddedQueen.builder().dataSource(losingReplies(ds, lose)).nodeId("t2").start()) {
      PushResult old = flaky.queue(q).push(List.of(PushItem.of("p", body(0)).transactionId("old"))).get(0);
      lose.set(1);
      List<PushResult> rs = flaky.queue(q).push(List.of(PushItem.of("p", body(1)).transactionId("old"),
          PushItem.of("p", body(2)).transactionId("mine"), PushItem.of("p", body(3))));
      assertThat(lose.get()).isZero();
      assertThat(rs).extracting(PushResult::status).containsExactly(PushStatus.DUPLICATE, PushStatus.QUEUED, PushStatus.QUEUED);
      assertThat(rs.get(0).messageId()).isEqualTo(old.messageId());
      assertThat(rs).extracting(PushResult::offset).containsExactly(0L, 1L, 2L);

      lose.set(1); // the fast path's first try commits and its reply is lost: the retry de-duplicates
      List<PushResult> fast = flaky.queue(q).partition("p").pushAll(List.of(body(4), body(5)));
      assertThat(lose.get()).isZero();
      assertThat(fast).extracting(PushResult::status).containsOnly(PushStatus.QUEUED);
      assertThat(fast).extracting(PushResult::offset).containsExactly(3L, 4L);
      assertStoredAsReported(rs.subList(1, 3));
      assertStoredAsReported(fast);
    }
    assertThat(storedSeqs(q)).containsExactlyInAnyOrderEntriesOf(Map.of(0, 1, 2, 1, 3, 1, 4, 1, 5, 1));
  }

  @Test
  void whenQueenGivesUpTheExceptionCarriesItemsThatAreSafeToPushAgain() {
    AtomicInteger lose = new AtomicInteger();
    try (Queen flaky = EmbeddedQueen.builder().dataSource(losingReplies(ds, lose)).nodeId("t3")
        .connectTimeout(Duration.ofMillis(300)).start()) {
      flaky.queue(q).partition("p").push(body(0));
      lose.set(Integer.MAX_VALUE); // every try commits (or finds its items) and loses its reply
      long t0 = System.nanoTime();
      PushOutcomeUnknownException e = catchThrowableOfType(
          () -> flaky.queue(q).push(List.of(PushItem.of("p", body(1)), PushItem.of("p", body(2)).transactionId("mine"))),
          PushOutcomeUnknownException.class);
      assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(3));
      assertThat(e).isInstanceOf(QueenDatabaseException.class);
      assertThat(e.isTransient()).isTrue();
      assertThat(e.sqlState()).isEqualTo("08006");
      assertThat(e.getMessage()).doesNotContain("seq").contains("push items() again");
      assertThat(e.items()).extracting(PushItem::queue).containsOnly(q);
      assertThat(e.items()).extracting(PushItem::partition).containsOnly("p");
      assertThat(e.items().get(0).transactionId()).matches(UUID_V7);
      assertThat(e.items().get(1).transactionId()).isEqualTo("mine");
      lose.set(0);
      List<PushResult> again = flaky.push(e.items());
      assertThat(again).extracting(PushResult::status).containsOnly(PushStatus.DUPLICATE); // the first try had stored them
    }
    assertThat(storedSeqs(q)).containsExactlyInAnyOrderEntriesOf(Map.of(0, 1, 1, 1, 2, 1));
  }

  /**
   * The generated ids of a partition's items in one push are one run; two or more of them are stored without a
   * transaction-id index entry, under one receipt (the run's first id, the partition, the first offset). Read back,
   * every message still reports its id's text as its transaction id.
   */
  @Test
  void aBatchGetsOneReceiptPerPartitionInsteadOfAnIndexEntryPerMessage() throws SQLException {
    queen.queue(q).partition("a").push(body(0)); // creates the partitions (the full push: index entries)
    queen.queue(q).partition("b").push(body(1));
    List<PushResult> one = queen.queue(q).partition("a").pushAll(List.of(body(2), body(3), body(4))); // push_partition
    List<PushResult> two = queen.queue(q).push(List.of(PushItem.of("a", body(5)), PushItem.of("b", body(6)),
        PushItem.of("a", body(7)), PushItem.of("b", body(8)), PushItem.of("b", body(9)))); // push_fast
    List<PushResult> single = queen.queue(q).push(List.of(PushItem.of("a", body(10)), PushItem.of("b", body(11)),
        PushItem.of("b", body(12)))); // "a" has one item: it keeps its index entry

    Map<UUID, long[]> receipts = receipts(q); // anchor -> {partition_id, first_offset}
    assertThat(receipts).containsOnlyKeys(one.get(0).messageId(), two.get(0).messageId(), two.get(1).messageId(),
        single.get(1).messageId());
    assertThat(receipts.get(one.get(0).messageId())[1]).isEqualTo(one.get(0).offset());
    assertThat(receipts.get(two.get(1).messageId())[1]).isEqualTo(two.get(1).offset());
    for (List<PushResult> rs : List.of(one, two, single)) {
      for (PushResult r : rs) {
        assertThat(r.transactionId()).isEqualTo(r.messageId().toString());
      }
    }
    // the items of a run: ids one apart, in the partition's offset order
    assertThat(two.get(2).messageId().getLeastSignificantBits() - two.get(0).messageId().getLeastSignificantBits()).isEqualTo(1);
    assertThat(two.get(4).messageId().getLeastSignificantBits() - two.get(1).messageId().getLeastSignificantBits()).isEqualTo(2);
    Map<UUID, String> stored = storedTransactionIds(q);
    assertThat(stored.get(one.get(1).messageId())).isNull();
    assertThat(stored.get(two.get(3).messageId())).isNull();
    assertThat(stored.get(single.get(0).messageId())).isEqualTo(single.get(0).transactionId());
    assertThat(stored.get(single.get(2).messageId())).isNull();

    List<Message> got = queen.queue(q).group("check").subscription(SubscriptionMode.ALL).batch(100).partitions(2).pop();
    assertThat(got).hasSize(13);
    got.forEach(m -> assertThat(m.transactionId()).isEqualTo(m.id().toString()));
  }

  /**
   * A push under receipts whose every reply is lost (each try commits or finds its items): Queen gives up, and
   * its items pushed again are found through the receipts, each a DUPLICATE of the message stored for it.
   */
  @Test
  void itemsOfAReceiptPushThatGaveUpArePushedAgainAsDuplicates() {
    AtomicInteger lose = new AtomicInteger();
    try (Queen flaky = EmbeddedQueen.builder().dataSource(losingReplies(ds, lose)).nodeId("t4")
        .connectTimeout(Duration.ofMillis(300)).start()) {
      flaky.queue(q).partition("p").push(body(0));
      flaky.queue(q).partition("r").push(body(1));
      flaky.queue(q).partition("s").push(body(11));
      lose.set(Integer.MAX_VALUE);
      PushOutcomeUnknownException e = catchThrowableOfType(() -> flaky.queue(q).push(List.of(PushItem.of("p", body(2)),
          PushItem.of("r", body(3)), PushItem.of("p", body(4)), PushItem.of("r", body(5)), PushItem.of("s", body(12)))),
          PushOutcomeUnknownException.class); // "s" has a single item: no receipt, found through its index entry
      PushOutcomeUnknownException e2 = catchThrowableOfType(() -> flaky.queue(q).partition("p").pushAll(
          List.of(body(6), body(7), body(8))), PushOutcomeUnknownException.class);
      lose.set(0);
      assertThat(receipts(q)).hasSize(3);

      List<PushResult> again = flaky.push(e.items());
      assertThat(again).extracting(PushResult::status).containsOnly(PushStatus.DUPLICATE);
      List<PushResult> again2 = flaky.push(List.of(e2.items().get(2), e2.items().get(0))); // a part, in another order
      assertThat(again2).extracting(PushResult::status).containsOnly(PushStatus.DUPLICATE);
      Map<UUID, long[]> rows = storedRows(q);
      for (int i = 0; i < 5; i++) {
        assertThat(again.get(i).messageId().toString()).isEqualTo(e.items().get(i).transactionId());
        assertThat(rows.get(again.get(i).messageId())[0]).isEqualTo(i < 4 ? 2 + i : 12);
        assertThat(rows.get(again.get(i).messageId())[1]).isEqualTo(again.get(i).offset());
      }
      assertThat(rows.get(again2.get(0).messageId())[0]).isEqualTo(8);
      assertThat(rows.get(again2.get(1).messageId())[0]).isEqualTo(6);
      // a caller's own id in that form, which no push generated: an ordinary transaction id
      String foreign = "01900000-0000-7000-8000-000000000005";
      assertThat(flaky.queue(q).push(List.of(PushItem.of("p", body(9)).transactionId(foreign))).get(0).status())
          .isEqualTo(PushStatus.QUEUED);
      assertThat(flaky.queue(q).push(List.of(PushItem.of("p", body(10)).transactionId(foreign))).get(0).status())
          .isEqualTo(PushStatus.DUPLICATE);
    }
    assertThat(storedSeqs(q)).containsExactlyInAnyOrderEntriesOf(
        Map.ofEntries(Map.entry(0, 1), Map.entry(1, 1), Map.entry(2, 1), Map.entry(3, 1), Map.entry(4, 1), Map.entry(5, 1),
            Map.entry(6, 1), Map.entry(7, 1), Map.entry(8, 1), Map.entry(9, 1), Map.entry(11, 1), Map.entry(12, 1)));
  }

  /** anchor → {partition_id, first_offset} of the queue's push receipts. */
  private Map<UUID, long[]> receipts(String queue) {
    Map<UUID, long[]> out = new HashMap<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select r.anchor, r.partition_id,"
        + " r.first_offset from queen.push_receipts r join queen.partitions p on p.id = r.partition_id"
        + " join queen.queues qq on qq.id = p.queue_id where qq.name = ?")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getObject(1, UUID.class), new long[] {rs.getLong(2), rs.getLong(3)});
        }
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return out;
  }

  /** message id → the transaction_id column as stored. */
  private Map<UUID, String> storedTransactionIds(String queue) throws SQLException {
    Map<UUID, String> out = new HashMap<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.id, m.transaction_id"
        + " from queen.messages m join queen.partitions p on p.id = m.partition_id"
        + " join queen.queues qq on qq.id = p.queue_id where qq.name = ?")) {
      st.setString(1, queue);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getObject(1, UUID.class), rs.getString(2));
        }
      }
    }
    return out;
  }

  /**
   * A few hundred pushes from one thread while another terminates the pusher's backends at random moments (running,
   * waiting for its commit, or idle in the pool): every item is stored exactly once.
   */
  @Test
  void pushesSurviveBackendsTerminatedAtRandomMoments() throws Exception {
    String chaos = "chaos";
    int pushes = 300;
    int batch = 20;
    int gaveUp = 0;
    int plainFailures = 0;
    Map<Integer, PushResult> reported = new HashMap<>();
    PushKiller killer = new PushKiller(ds, "push-killer", 0.1, 5, 30, Integer.MAX_VALUE);
    try {
      for (int i = 0; i < pushes; i++) {
        List<PushItem> items = new ArrayList<>(batch);
        for (int j = 0; j < batch; j++) {
          int seq = i * batch + j;
          PushItem it = PushItem.of("p" + (seq % 4), body(seq));
          items.add(i % 10 == 9 ? it.transactionId("c-" + seq) : it); // every tenth push brings its own ids
        }
        List<PushResult> rs = null;
        for (int round = 0; rs == null; round++) {
          assertThat(round).as("push %d needed too many rounds", i).isLessThan(50);
          try {
            rs = queen.queue(chaos).push(items);
            // Queen's own retries translate what their earlier tries stored: the caller sees each item pushed once
            assertThat(rs).extracting(PushResult::status).as("push %d", i).containsOnly(PushStatus.QUEUED);
          } catch (PushOutcomeUnknownException e) {
            gaveUp++;
            items = e.items(); // the documented safe retry: the same ids again
            rs = retryUntilDone(chaos, items); // QUEUED, or DUPLICATE of what the failed call stored: checked below
          } catch (QueenDatabaseException e) {
            plainFailures++; // nothing was stored: the original items may go again
          }
        }
        for (int j = 0; j < batch; j++) {
          reported.put(i * batch + j, rs.get(j));
        }
      }
    } finally {
      killer.close();
    }
    System.out.printf("chaos: %d pushes of %d, %d backends terminated, %d gave up (retried with e.items()),"
        + " %d failed before anything was sent%n", pushes, batch, killer.kills(), gaveUp, plainFailures);
    assertThat(killer.kills()).as("the killer hit something").isPositive();

    Map<Integer, Integer> stored = storedSeqs(chaos);
    assertThat(stored).hasSize(pushes * batch);
    assertThat(stored.values()).containsOnly(1);
    // every reported id and offset is the stored message's
    Map<UUID, long[]> rows = storedRows(chaos);
    for (Map.Entry<Integer, PushResult> e : reported.entrySet()) {
      long[] row = rows.get(e.getValue().messageId());
      assertThat(row).as("seq %d", e.getKey()).isNotNull();
      assertThat(row[0]).as("seq %d", e.getKey()).isEqualTo((long) e.getKey());
      assertThat(row[1]).isEqualTo(e.getValue().offset());
    }
  }

  private List<PushResult> retryUntilDone(String queue, List<PushItem> items) {
    for (int round = 0; ; round++) {
      try {
        return queen.queue(queue).push(items);
      } catch (PushOutcomeUnknownException e) {
        assertThat(round).isLessThan(50);
      }
    }
  }

  private void assertStoredAsReported(List<PushResult> rs) {
    Map<UUID, long[]> rows = storedRows(rs.get(0).queue());
    for (PushResult r : rs) {
      assertThat(rows.get(r.messageId())).as("message %s", r.messageId()).isNotNull();
      assertThat(rows.get(r.messageId())[1]).isEqualTo(r.offset());
    }
  }

  /** seq → how many stored messages carry it. */
  private Map<Integer, Integer> storedSeqs(String queue) {
    Map<Integer, Integer> out = new HashMap<>();
    for (long[] row : storedRows(queue).values()) {
      out.merge((int) row[0], 1, Integer::sum);
    }
    return out;
  }

  /** message id → {seq, offset}. */
  private Map<UUID, long[]> storedRows(String queue) {
    return PushKiller.storedRows(ds, queue);
  }

  // ------------------------------------------------------------------------------------------------------------------
  // A DataSource whose push statements, while armed, run for real (and commit) and then report a lost connection, as
  // when the server's reply never arrives: the database is real, only the reply is dropped.

  private static DataSource losingReplies(DataSource real, AtomicInteger lose) {
    return (DataSource) Proxy.newProxyInstance(PushRetryTest.class.getClassLoader(), new Class<?>[] {DataSource.class},
        (proxy, m, args) -> {
          Object r = invoke(real, m, args);
          return r instanceof Connection c ? connection(c, lose) : r;
        });
  }

  private static Connection connection(Connection real, AtomicInteger lose) {
    InvocationHandler h = (proxy, m, args) -> {
      Object r = invoke(real, m, args);
      if (r instanceof PreparedStatement ps && m.getName().equals("prepareStatement") && ((String) args[0]).contains(".push")) {
        return statement(ps, lose);
      }
      return r;
    };
    return (Connection) Proxy.newProxyInstance(PushRetryTest.class.getClassLoader(), new Class<?>[] {Connection.class}, h);
  }

  private static PreparedStatement statement(PreparedStatement real, AtomicInteger lose) {
    InvocationHandler h = (proxy, m, args) -> {
      Object r = invoke(real, m, args);
      if (m.getName().equals("executeQuery") && lose.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
        ((ResultSet) r).close(); // it ran and committed (auto-commit); the caller never hears of it
        throw new SQLException("injected: the connection was lost before the reply", "08006");
      }
      return r;
    };
    return (PreparedStatement) Proxy.newProxyInstance(PushRetryTest.class.getClassLoader(),
        new Class<?>[] {PreparedStatement.class}, h);
  }

  private static Object invoke(Object target, java.lang.reflect.Method m, Object[] args) throws Throwable {
    try {
      return m.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
