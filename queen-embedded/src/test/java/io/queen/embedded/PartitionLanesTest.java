package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.PushItem;
import io.queen.PushOutcomeUnknownException;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.QueueFullException;
import io.queen.testkit.QueenPostgres;
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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Pushes into one partition from several threads of a node wait in the node while the partition is busy and go
 * together in one transaction: each call's items stored once, contiguous, in order, as reported; a call that cannot go
 * combined goes alone; killed connections lose and duplicate nothing.
 */
@QueenPostgres
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PartitionLanesTest {
  private DataSource ds;
  private Queen queen;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  @BeforeEach
  void start(DataSource ds) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("lanes").meterRegistry(registry).start();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  @Test
  void callsWaitingForABusyPartitionGoInOneTransaction() throws Exception {
    String q = "lanes-one";
    queen.queue(q).partition("p").push(Map.of("seq", -1));
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try (Connection locker = ds.getConnection(); Connection admin = ds.getConnection()) {
      locker.setAutoCommit(false);
      try (PreparedStatement st = locker.prepareStatement("select p.id from queen.partitions p join queen.queues qq"
          + " on qq.id = p.queue_id where qq.name = ? and p.name = 'p' for update of p")) {
        st.setString(1, q);
        st.executeQuery().close();
      }
      // the first push goes to the database and waits for the row; the next five wait in the node
      Future<List<PushResult>> first = pool.submit(() -> queen.queue(q).partition("p").pushAll(List.of(Map.of("seq", 0))));
      awaitLockWaiters(admin, 1);
      List<CompletableFuture<List<PushResult>>> rest = new ArrayList<>();
      List<Thread> waiting = new ArrayList<>();
      for (int t = 1; t <= 5; t++) {
        List<Object> items = new ArrayList<>();
        for (int k = 0; k < t; k++) {
          items.add(Map.of("seq", t * 10 + k));
        }
        CompletableFuture<List<PushResult>> f = new CompletableFuture<>();
        Thread th = new Thread(() -> {
          try {
            f.complete(queen.queue(q).partition("p").pushAll(items));
          } catch (RuntimeException e) {
            f.completeExceptionally(e);
          }
        }, "lanes-waiter-" + t);
        th.start();
        rest.add(f);
        waiting.add(th);
      }
      // parked on the partition's lane in the JVM
      await().atMost(Duration.ofSeconds(10)).until(() -> waiting.stream().allMatch(th -> th.getState() == Thread.State.WAITING));
      assertThat(LockWaiters.count(admin, "%.push%")).as("the five wait in the node, not in the database").isEqualTo(1);
      locker.commit();

      Map<UUID, Long> xminById = xmins(q);
      List<PushResult> a = first.get(30, TimeUnit.SECONDS);
      assertThat(a).extracting(PushResult::offset).containsExactly(1L);
      Set<Long> restXmins = new HashSet<>();
      Set<Long> offsets = new HashSet<>();
      for (int t = 1; t <= 5; t++) {
        List<PushResult> rs = rest.get(t - 1).get(30, TimeUnit.SECONDS);
        assertThat(rs).hasSize(t);
        for (int k = 0; k < t; k++) {
          PushResult r = rs.get(k);
          assertThat(r.index()).isEqualTo(k);
          assertThat(r.status()).isEqualTo(PushStatus.QUEUED);
          assertThat(r.partition()).isEqualTo("p");
          assertThat(r.transactionId()).isEqualTo(r.messageId().toString());
          assertThat(r.offset()).as("a call's items contiguous and in order").isEqualTo(rs.get(0).offset() + k);
          assertThat(offsets.add(r.offset())).isTrue();
        }
        assertStoredAsReported(q, rs, t * 10);
        xminById = xmins(q);
        restXmins.add(xminById.get(rs.get(0).messageId()));
      }
      assertThat(restXmins).as("the five calls were one transaction").hasSize(1);
      assertThat(registry.get("queen.pushes.combined").tag("queue", q).counter().count()).isEqualTo(5);
      assertThat(restXmins).doesNotContain(xminById.get(a.get(0).messageId()));
      assertThat(offsets).containsExactlyInAnyOrder(2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L, 10L, 11L, 12L, 13L, 14L, 15L, 16L);
      assertThat(storedOffsets(q)).containsExactly(0L, 1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L, 10L, 11L, 12L, 13L, 14L, 15L, 16L);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aBoundedQueueStillCountsEveryCallAlone() throws Exception {
    // push_partition leaves a bounded queue to the full push: a combined batch goes back to its calls, each alone, so
    // maxSize refuses exactly the calls beyond it and nothing else
    String q = "lanes-bounded";
    queen.queue(q).configure(c -> c.maxSize(50));
    queen.queue(q).partition("p").push(Map.of("seq", -1));
    int threads = 8;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    AtomicInteger full = new AtomicInteger();
    AtomicInteger stored = new AtomicInteger();
    List<Future<?>> fs = new ArrayList<>();
    try {
      for (int t = 0; t < threads; t++) {
        int index = t;
        fs.add(pool.submit(() -> {
          for (int i = 0; i < 10; i++) {
            try {
              queen.queue(q).partition("p").push(Map.of("seq", index * 100 + i));
              stored.incrementAndGet();
            } catch (QueueFullException e) {
              full.incrementAndGet();
            }
          }
          return null;
        }));
      }
      for (Future<?> f : fs) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(stored.get()).isEqualTo(49);
    assertThat(full.get()).isEqualTo(31);
    assertThat(storedOffsets(q)).hasSize(50);
  }

  /**
   * Eight threads push single messages and small batches into one partition while another thread terminates their
   * backends at random moments: every item is stored exactly once, in gapless offsets, as reported.
   */
  @Test
  void combinedPushesSurviveBackendsTerminatedAtRandomMoments() throws Exception {
    String q = "lanes-chaos";
    queen.queue(q).partition("p").push(Map.of("seq", -1));
    int threads = 8;
    int calls = 150;
    AtomicInteger gaveUp = new AtomicInteger();
    Map<Integer, PushResult> reported = new ConcurrentHashMap<>();
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<?>> fs = new ArrayList<>();
    // running pushes only; 80 shots hit every step of a push, more only make the test slow
    PushKiller killer = new PushKiller(ds, "lanes-killer", 0, 2, 20, 80);
    try {
      for (int t = 0; t < threads; t++) {
        int index = t;
        fs.add(pool.submit(() -> {
          for (int i = 0; i < calls; i++) {
            int size = 1 + (i % 3 == 0 ? ThreadLocalRandom.current().nextInt(4) : 0);
            List<PushItem> items = new ArrayList<>();
            for (int k = 0; k < size; k++) {
              items.add(PushItem.of("p", Map.of("seq", (index * calls + i) * 10 + k)));
            }
            List<PushResult> rs = null;
            boolean again = false;
            for (int round = 0; rs == null; round++) {
              assertThat(round).isLessThan(50);
              try {
                rs = queen.queue(q).push(items);
                // Queen's own retries translate what their earlier tries stored: QUEUED once; after giving up, the
                // caller's push of e.items() reports DUPLICATE for what the failed call stored
                assertThat(rs).extracting(PushResult::status)
                    .isSubsetOf(again ? List.of(PushStatus.QUEUED, PushStatus.DUPLICATE) : List.of(PushStatus.QUEUED));
              } catch (PushOutcomeUnknownException e) {
                gaveUp.incrementAndGet();
                items = e.items(); // the documented safe retry: the same transaction ids again
                again = true;
              } catch (QueenDatabaseException e) {
                // nothing was stored: the same items may go again
              }
            }
            for (int k = 0; k < size; k++) {
              reported.put((index * calls + i) * 10 + k, rs.get(k));
            }
          }
          return null;
        }));
      }
      for (Future<?> f : fs) {
        f.get(150, TimeUnit.SECONDS);
      }
    } finally {
      killer.close();
      pool.shutdownNow();
    }
    double combined = registry.get("queen.pushes.combined").tag("queue", q).counter().count();
    System.out.printf("lanes chaos: %d items, %d calls, %.0f of them combined, %d backends terminated, %d calls gave up%n",
        reported.size(), threads * calls, combined, killer.kills(), gaveUp.get());
    assertThat(killer.kills()).as("the killer hit something").isPositive();
    assertThat(combined).as("calls went combined").isPositive();
    Map<Integer, long[]> bySeq = new HashMap<>();
    Map<UUID, long[]> rows = storedRows(q);
    for (long[] row : rows.values()) {
      assertThat(bySeq.put((int) row[0], row)).as("seq %d stored once", row[0]).isNull();
    }
    assertThat(bySeq).hasSize(reported.size() + 1);
    for (Map.Entry<Integer, PushResult> e : reported.entrySet()) {
      long[] row = rows.get(e.getValue().messageId());
      assertThat(row).as("seq %d", e.getKey()).isNotNull();
      assertThat(row[0]).isEqualTo((long) e.getKey());
      assertThat(row[1]).isEqualTo(e.getValue().offset());
    }
    List<Long> offsets = storedOffsets(q);
    for (int i = 0; i < offsets.size(); i++) {
      assertThat(offsets.get(i)).as("gapless").isEqualTo((long) i);
    }
  }

  private void assertStoredAsReported(String q, List<PushResult> rs, int firstSeq) {
    Map<UUID, long[]> rows = storedRows(q);
    for (int k = 0; k < rs.size(); k++) {
      long[] row = rows.get(rs.get(k).messageId());
      assertThat(row).isNotNull();
      assertThat(row[0]).isEqualTo(firstSeq + k);
      assertThat(row[1]).isEqualTo(rs.get(k).offset());
    }
  }

  private static void awaitLockWaiters(Connection admin, int n) {
    await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(10))
        .until(() -> LockWaiters.count(admin, "%.push%") >= n);
  }

  /** message id → the id of the transaction that stored it. */
  private Map<UUID, Long> xmins(String q) throws SQLException {
    Map<UUID, Long> out = new HashMap<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.id, m.xmin::text::bigint"
        + " from queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues qq"
        + " on qq.id = p.queue_id where qq.name = ?")) {
      st.setString(1, q);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.put(rs.getObject(1, UUID.class), rs.getLong(2));
        }
      }
    }
    return out;
  }

  private List<Long> storedOffsets(String q) throws SQLException {
    List<Long> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.\"offset\" from"
        + " queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues qq on qq.id = p.queue_id"
        + " where qq.name = ? order by 1")) {
      st.setString(1, q);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getLong(1));
        }
      }
    }
    return out;
  }

  private Map<UUID, long[]> storedRows(String q) {
    return PushKiller.storedRows(ds, q);
  }

}
