package io.queen.embedded.internal.ops;

import io.queen.RetentionRun;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Metrics;
import java.sql.Array;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Removes old messages of queues with {@code retention} or {@code completedRetention} (docs/retention.md).
 *
 * <p>A pass walks the partitions of those queues in keyset pages of {@link #PAGE} (one short read each: the
 * partition row and its first message), and for each partition whose first message is old enough calls
 * {@code retention_step} in auto-commit until it removes less than a batch: one partition, at most
 * {@link #BATCH} messages, one short transaction each. Partitions of queues without {@code allowDropPastCommitted}
 * go first in chunks of {@link #CHUNK_PARTITIONS}, one transaction running a step of {@link #CHUNK_BATCH} on each,
 * so a queue of many partitions with a few old messages each costs a commit per chunk, not per partition. The step takes the retention advisory lock itself, so one
 * node at a time removes messages; when another node holds it the pass ends at once. It never waits for a pusher
 * (the partition row is taken {@code SKIP LOCKED}): a partition a push held is tried again after the walk, in rounds
 * after the pauses of {@link #BUSY_PAUSES_MS}, and what is still held then waits for the next pass. After
 * each step that removed something it rests twice as long as the step took, so a large backlog is removed at about a
 * third of the speed one backend could, leaving the rest to push and pop. Passes start every {@link #PERIOD_MS} at a
 * fixed rate: when a pass takes longer (ingest outruns one period's paced share), the next starts right after it, and
 * after two such passes in a row the rests are halved, pass by pass, down to a quarter of the usual (about two thirds of
 * a backend); a pass within half the period doubles them back ({@link #pace}).
 *
 * <p>The walk also notes the partitions that hold no message and have had no push for the node's
 * {@code removeEmptyPartitionsAfter}; after a pass that ran, {@link #removeEmpty} removes them with their cursors
 * ({@code remove_empty_partitions} checks each again under its row lock), {@link #REMOVE_CHUNK} per transaction.
 *
 * <p>At the end of a pass the queue's retention state (oldest kept message, the group holding it) is written to
 * {@code retention_state}, read by {@code status()} and the gauges. Losses under {@code allowDropPastCommitted}
 * are logged at WARN once per pass, queue and group, and counted. Thread-safe: passes of one node are
 * serialised.
 */
public final class RetentionJanitor {
  private static final Logger LOG = LoggerFactory.getLogger(RetentionJanitor.class);
  /** How often the node's janitor runs a pass. */
  public static final long PERIOD_MS = 30_000;
  /** Messages per step (one transaction). */
  static final int BATCH = 500;
  /**
   * The pauses before each round of tries, after the walk, on partitions a push held when the walk came by (a push
   * holds its partition rows through its commit: a few ms, more while the disk is slow to flush).
   */
  static final long[] BUSY_PAUSES_MS = {20, 50, 100};
  /** Partitions per chunk: one transaction running a step on each (see {@link #chunk}). */
  static final int CHUNK_PARTITIONS = 100;
  /** Messages per partition in a chunk's steps; a partition with more is then drained alone in steps of {@link #BATCH}. */
  static final int CHUNK_BATCH = 20;
  /** Partitions per page of the walk. */
  static final int PAGE = 1_000;
  /** The longest rest after one step (see {@link #rest}). */
  static final long MAX_REST_MS = 200;
  /** The rest after a step, in multiples of the step's time (see {@link #rest}), while retention keeps up. */
  static final double REST_FACTOR = 2;
  /** The least rest factor a janitor that is behind comes down to: it then takes about two thirds of one backend. */
  static final double MIN_REST_FACTOR = 0.5;
  /** Passes in a row longer than {@link #PERIOD_MS} after which the janitor halves its rests (see {@link #pace}). */
  static final int BEHIND_AFTER = 2;
  /** Empty partitions per call of {@code remove_empty_partitions} (one transaction). */
  static final int REMOVE_CHUNK = 500;
  /** Empty partitions one pass removes at most (the rest wait for the next pass; bounds the ids a pass keeps). */
  static final int REMOVE_PER_PASS = 100_000;

  private final String node;
  private final DataSource ds;
  private final Metrics metrics;
  private final String pageSql;
  private final String queuesSql;
  private final String stepSql;
  private final String chunkSql;
  private final String stateSql;
  private final String removeSql;
  private final long removeEmptyAfterMs;
  private final ReentrantLock passLock = new ReentrantLock();
  /** The rest factor now (guarded by {@link #passLock}). */
  private double restFactor = REST_FACTOR;
  /** Passes in a row that took longer than {@link #PERIOD_MS} (guarded by {@link #passLock}). */
  private int overran;
  private final long[] busyPausesMs;

  /**
   * @param removeEmptyAfter how long a partition must have held no message and had no push before a pass removes it;
   *     zero: never
   */
  public RetentionJanitor(String node, DataSource ds, String schema, Metrics metrics, Duration removeEmptyAfter) {
    this(node, ds, schema, metrics, removeEmptyAfter, BUSY_PAUSES_MS);
  }

  /** With other pauses than {@link #BUSY_PAUSES_MS} before the rounds on busy partitions. */
  RetentionJanitor(String node, DataSource ds, String schema, Metrics metrics, Duration removeEmptyAfter,
      long[] busyPausesMs) {
    this.busyPausesMs = busyPausesMs.clone();
    this.removeEmptyAfterMs = removeEmptyAfter.toMillis();
    this.node = node;
    this.ds = ds;
    this.metrics = metrics;
    this.pageSql = "select p.id, q.id, q.name, p.name, p.first_offset, m.created_at,"
        + " m.created_at <= now() - least(nullif(q.retention_ms, 0), nullif(q.completed_retention_ms, 0))"
        + "   * interval '1 millisecond', q.allow_drop_past_committed,"
        // empty (retention removed its last message) and no push for removeEmptyAfter: a candidate for removal
        + (removeEmptyAfterMs > 0 ? " p.first_offset >= p.next_offset and p.last_message_at <= now() - interval '"
            + removeEmptyAfterMs + " milliseconds'" : " false")
        + " from " + schema + ".partitions p join " + schema + ".queues q on q.id = p.queue_id"
        + " left join " + schema + ".messages m on m.partition_id = p.id and m.\"offset\" = p.first_offset"
        + " where (q.retention_ms > 0 or q.completed_retention_ms > 0) and p.queue_id = any(?) and p.id > ?"
        + " order by p.id limit " + PAGE;
    this.queuesSql = "select coalesce(array_agg(q.id), '{}') from " + schema + ".queues q"
        + " where q.retention_ms > 0 or q.completed_retention_ms > 0";
    this.stepSql = "select removed, skipped, first_at, first_offset, held_by, lost_groups, lost_counts, lost_to from "
        + schema + ".retention_step(?, " + BATCH + ")";
    this.chunkSql = "select r.removed, r.skipped, r.first_at, r.first_offset, r.held_by, r.lost_groups, r.lost_counts,"
        + " r.lost_to from unnest(?::bigint[]) with ordinality as x(id, i) cross join lateral " + schema
        + ".retention_step(x.id, " + CHUNK_BATCH + ") r order by x.i";
    this.stateSql = "insert into " + schema + ".retention_state as r (queue_id, oldest_at, oldest_partition,"
        + " oldest_offset, held_by, checked_at) select q.id, x.at, x.part, x.off, x.held, now()"
        + " from " + schema + ".queues q left join unnest(?::bigint[], ?::timestamptz[], ?::text[], ?::bigint[], ?::text[])"
        + "   as x(qid, at, part, off, held) on x.qid = q.id"
        + " where q.retention_ms > 0 or q.completed_retention_ms > 0"
        + " on conflict (queue_id) do update set oldest_at = excluded.oldest_at,"
        + " oldest_partition = excluded.oldest_partition, oldest_offset = excluded.oldest_offset,"
        + " held_by = excluded.held_by, checked_at = excluded.checked_at";
    this.removeSql = "select queue_name, removed from " + schema + ".remove_empty_partitions(?::bigint[], ?)";
  }

  /** The oldest kept message of a queue seen so far in a pass. */
  private static final class Oldest {
    Timestamp at;
    String partition;
    long offset;
    String heldBy;

    void offer(Timestamp t, String p, long o, String held) {
      if (t != null && (at == null || t.before(at))) {
        at = t;
        partition = p;
        offset = o;
        heldBy = held;
      }
    }
  }

  /** A group's losses in one pass. */
  private static final class Lost {
    long messages;
    int partitions;
    String lastPartition;
    long lastUpTo;
  }

  /** One pass, on the scheduler: never throws. */
  public void runQuietly() {
    try {
      run();
    } catch (RuntimeException e) {
      if (Thread.currentThread().isInterrupted()) {
        LOG.debug("{} - retention pass stopped by close ({})", node, Sql.describe(e));
        return;
      }
      LOG.warn("{} - retention pass failed ({}); next try in {} ms", node, Sql.describe(e), PERIOD_MS);
    }
  }

  /** One pass over every queue with retention; returns what it did. */
  public RetentionRun run() {
    passLock.lock();
    try {
      long t0 = System.nanoTime();
      RetentionRun r = pass();
      pace((System.nanoTime() - t0) / 1_000_000);
      return r;
    } finally {
      passLock.unlock();
    }
  }

  /**
   * Adapts the rests to how the passes went: after {@link #BEHIND_AFTER} passes in a row that took longer than
   * {@link #PERIOD_MS} (ingest brings more than a third of one backend removes, so the table grows), each further such
   * pass halves the rest factor, down to {@link #MIN_REST_FACTOR}; a pass that took less than half the period (room to
   * spare at this pace) doubles it back, up to {@link #REST_FACTOR}. A one-time backlog that one pass clears does not
   * change it, and a janitor that keeps up only at the lower factor keeps it (its passes fill most of the period), so
   * the pace does not swing pass by pass. Logs at INFO when it leaves the usual factor and when it is back. Returns
   * the factor now.
   */
  double pace(long passMillis) {
    if (passMillis >= PERIOD_MS) {
      overran++;
      if (overran >= BEHIND_AFTER && restFactor > MIN_REST_FACTOR) {
        boolean first = restFactor == REST_FACTOR;
        restFactor = Math.max(MIN_REST_FACTOR, restFactor / 2);
        if (first) {
          LOG.info("{} - retention is behind ingest: {} passes in a row took longer than the {} s period (the last {}"
              + " s); it now rests less between steps, down to {}x their time while it stays behind", node, overran,
              PERIOD_MS / 1000, passMillis / 1000, MIN_REST_FACTOR);
        } else {
          LOG.debug("{} - retention still behind ingest (a pass took {} s): it rests {}x as long as each step took",
              node, passMillis / 1000, restFactor);
        }
      }
      return restFactor;
    }
    overran = 0;
    if (passMillis < PERIOD_MS / 2 && restFactor < REST_FACTOR) {
      restFactor = Math.min(REST_FACTOR, restFactor * 2);
      if (restFactor == REST_FACTOR) {
        LOG.info("{} - retention keeps up with ingest again (a pass took {} s): it rests {}x as long as each step"
            + " took, as usual", node, passMillis / 1000, restFactor);
      }
    }
    return restFactor;
  }

  /** What a pass has done so far. */
  private static final class Pass {
    long removed;
    long lostTotal;
    long visited;
    long emptyRemoved;
    /** Empty partitions idle for removeEmptyAfter as the walk read them (checked again under their locks). */
    final List<Long> empty = new ArrayList<>();
    final Map<Long, Oldest> oldest = new HashMap<>();
    final Map<String, Lost> lost = new LinkedHashMap<>();
  }

  /**
   * A partition of a queue with retention as the walk reads it: its first kept message ({@code firstAt} null when it
   * holds none), whether that message is old enough to look at, and whether its queue allows dropping past committed.
   */
  private record PageRow(long pid, long qid, String queue, String partition, long firstOffset, Timestamp firstAt,
      boolean eligible, boolean dropping, boolean emptyIdle) {}

  /** How {@link #drain} left a partition. */
  private enum Drained { DONE, BUSY, NOT_OURS }

  private RetentionRun pass() {
    // the queues with retention, read first: with none there is nothing to walk, and the pages name them, so a
    // pass reads their partitions only (not every partition of the database in id order, as it did before)
    Long[] queues = retentionQueues();
    if (queues.length == 0) {
      return new RetentionRun(true, 0, 0, 0, 0, 0);
    }
    long after = 0;
    boolean ran = true;
    Pass pass = new Pass();
    List<PageRow> busy = new ArrayList<>();
    List<PageRow> chunk = new ArrayList<>(CHUNK_PARTITIONS);
    walk:
    while (true) {
      List<PageRow> page = readPage(queues, after);
      if (page.isEmpty()) {
        break;
      }
      for (PageRow r : page) {
        after = r.pid();
        if (r.emptyIdle() && pass.empty.size() < REMOVE_PER_PASS) {
          pass.empty.add(r.pid());
        }
        Oldest o = pass.oldest.computeIfAbsent(r.qid(), k -> new Oldest());
        if (!r.eligible()) {
          o.offer(r.firstAt(), r.partition(), r.firstOffset(), null);
          continue;
        }
        pass.visited++;
        if (!r.dropping()) {
          chunk.add(r);
          if (chunk.size() == CHUNK_PARTITIONS && !chunk(chunk, pass, busy)) {
            ran = false;
            break walk;
          }
          continue;
        }
        Drained d = drain(r, pass);
        if (d == Drained.NOT_OURS) {
          ran = false;
          break walk;
        }
        if (d == Drained.BUSY) {
          busy.add(r);
        }
      }
    }
    if (ran && !chunk.isEmpty() && !chunk(chunk, pass, busy)) {
      ran = false;
    }
    // partitions a push held when the walk came by: a few more tries after short pauses (a push holds its partition
    // rows for one transaction, a few ms), so under steady pushing the janitor does not leave a busy partition's
    // backlog for the next pass (with 4 pushers holding 10 of 100 partitions each, most partitions were left so)
    for (int round = 0; ran && round < busyPausesMs.length && !busy.isEmpty(); round++) {
      pause(busyPausesMs[round]);
      List<PageRow> still = new ArrayList<>();
      for (PageRow r : busy) {
        Drained d = drain(r, pass);
        if (d == Drained.NOT_OURS) {
          ran = false;
          break;
        }
        if (d == Drained.BUSY) {
          still.add(r);
        }
      }
      busy = still;
    }
    for (PageRow r : busy) {
      pass.oldest.get(r.qid()).offer(r.firstAt(), r.partition(), r.firstOffset(), null);
    }
    for (Map.Entry<String, Lost> e : pass.lost.entrySet()) {
      String[] qg = e.getKey().split("\u0000", 2);
      Lost l = e.getValue();
      LOG.warn("{} - retention removed {} message(s) of queue '{}' that group '{}' had not consumed"
          + " (allowDropPastCommitted), in {} partition(s), the last one '{}' up to offset {}; the group resumes at"
          + " the oldest kept message", node, l.messages, qg[0], qg[1], l.partitions, l.lastPartition, l.lastUpTo);
    }
    if (ran) {
      writeState(pass.oldest);
      removeEmpty(pass);
    }
    if (pass.removed > 0) {
      LOG.debug("{} - retention removed {} message(s) from {} partition(s); {} busy partition(s) left for the next pass",
          node, pass.removed, pass.visited, busy.size());
    }
    return new RetentionRun(ran, pass.visited, pass.removed, pass.lostTotal, ran ? busy.size() : 0, pass.emptyRemoved);
  }

  /**
   * Removes the empty partitions the walk found idle, {@link #REMOVE_CHUNK} per transaction, resting after each chunk
   * as after a step. {@code remove_empty_partitions} checks each one again under its row lock and leaves one a
   * push holds or touched since, or one with a lease, a redelivery, a dead letter or a recorded loss.
   */
  private void removeEmpty(Pass pass) {
    Map<String, Long> byQueue = new LinkedHashMap<>();
    for (int from = 0; from < pass.empty.size(); from += REMOVE_CHUNK) {
      List<Long> ids = pass.empty.subList(from, Math.min(pass.empty.size(), from + REMOVE_CHUNK));
      long t0 = System.nanoTime();
      Map<String, Long> chunk = Sql.autoCommit(ds, "empty partitions removal", c -> {
        Map<String, Long> removed = new LinkedHashMap<>();
        try (PreparedStatement st = c.prepareStatement(removeSql)) {
          st.setArray(1, c.createArrayOf("bigint", ids.toArray()));
          st.setLong(2, removeEmptyAfterMs);
          try (ResultSet rs = st.executeQuery()) {
            while (rs.next()) {
              removed.put(rs.getString(1), rs.getLong(2));
            }
          }
        }
        return removed;
      });
      long n = 0;
      for (Map.Entry<String, Long> e : chunk.entrySet()) {
        byQueue.merge(e.getKey(), e.getValue(), Long::sum);
        n += e.getValue();
      }
      pass.emptyRemoved += n;
      rest(n, System.nanoTime() - t0);
    }
    byQueue.forEach(metrics::partitionsRemoved);
    if (pass.emptyRemoved > 0) {
      LOG.debug("{} - retention removed {} empty partition(s) without a push for {} ms: {}", node, pass.emptyRemoved,
          removeEmptyAfterMs, byQueue);
    }
  }

  /**
   * Runs steps on one partition of a page row until it removes less than a batch. {@code BUSY} when a push held the
   * partition row at some step (what that step would have removed is still there), {@code NOT_OURS} when another
   * node runs retention.
   */
  private Drained drain(PageRow r, Pass pass) {
    while (true) {
      long t0 = System.nanoTime();
      Step s = step(r.pid());
      rest(s.removed, System.nanoTime() - t0);
      if (s.skipped != null) {
        return s.skipped.equals("lock") ? Drained.NOT_OURS : Drained.BUSY;
      }
      if (account(r, s, BATCH, pass)) {
        return Drained.DONE;
      }
    }
  }

  /**
   * One transaction running a step of at most {@link #CHUNK_BATCH} messages on each partition of {@code rows} (queues
   * without {@code allowDropPastCommitted}, whose steps lock no cursor, so holding several partitions at once cannot
   * wait in a circle with an ack), then each partition that had more drained alone. Before, every partition cost its
   * own transaction and commit even when it held one old message: a source connector's queue (one partition per row
   * key) was cleaned at about 25 partitions a second. Clears {@code rows}; false when another node runs retention.
   */
  private boolean chunk(List<PageRow> rows, Pass pass, List<PageRow> busy) {
    Long[] pids = new Long[rows.size()];
    for (int i = 0; i < pids.length; i++) {
      pids[i] = rows.get(i).pid();
    }
    long t0 = System.nanoTime();
    List<Step> steps = Sql.autoCommit(ds, "retention chunk", c -> {
      List<Step> out = new ArrayList<>(pids.length);
      try (PreparedStatement st = c.prepareStatement(chunkSql)) {
        st.setArray(1, c.createArrayOf("bigint", pids));
        try (ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            out.add(readStep(rs));
          }
        }
      }
      return out;
    });
    long removed = 0;
    for (Step s : steps) {
      removed += s.removed;
    }
    rest(removed, System.nanoTime() - t0);
    List<PageRow> more = new ArrayList<>();
    for (int i = 0; i < steps.size(); i++) {
      Step s = steps.get(i);
      PageRow r = rows.get(i);
      if (s.skipped != null) {
        if (s.skipped.equals("lock")) {
          rows.clear();
          return false;
        }
        busy.add(r);
      } else if (!account(r, s, CHUNK_BATCH, pass)) {
        more.add(r);
      }
    }
    rows.clear();
    for (PageRow r : more) {
      Drained d = drain(r, pass);
      if (d == Drained.NOT_OURS) {
        return false;
      }
      if (d == Drained.BUSY) {
        busy.add(r);
      }
    }
    return true;
  }

  /**
   * Counts what one step on page row {@code r} did; true when the partition is done for this pass (the step removed
   * less than its {@code batch}, or nothing old is left).
   */
  private boolean account(PageRow r, Step s, int batch, Pass pass) {
    String queue = r.queue();
    String partition = r.partition();
    pass.removed += s.removed;
    if (s.removed > 0) {
      metrics.retentionRemoved(queue, s.removed);
    }
    for (int i = 0; s.lostGroups != null && i < s.lostGroups.length; i++) {
      Lost l = pass.lost.computeIfAbsent(queue + "\u0000" + s.lostGroups[i], k -> new Lost());
      l.messages += s.lostCounts[i];
      l.partitions++;
      l.lastPartition = partition;
      l.lastUpTo = s.lostTo;
      pass.lostTotal += s.lostCounts[i];
      metrics.retentionLost(queue, s.lostGroups[i], s.lostCounts[i]);
    }
    if (s.removed < batch || s.firstAt == null) {
      pass.oldest.get(r.qid()).offer(s.firstAt, partition, s.firstOffset, s.heldBy);
      return true;
    }
    return false;
  }

  private static void pause(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Paces the deleting: after a step that removed messages, the janitor rests {@link #REST_FACTOR} times as long as
   * the step took (at most {@link #MAX_REST_MS}), so it takes about a third of one backend's time from a busy
   * server, and push and pop keep the rest: a janitor deleting a large backlog must not slow pushes
   * noticeably. While it is behind ingest the factor is lower ({@link #pace}).
   */
  private void rest(long removed, long stepNanos) {
    if (removed <= 0) {
      return;
    }
    long nanos = Math.min(MAX_REST_MS * 1_000_000, (long) (restFactor * stepNanos));
    try {
      Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private Long[] retentionQueues() {
    return Sql.autoCommit(ds, "retention queues", c -> {
      try (PreparedStatement st = c.prepareStatement(queuesSql); ResultSet rs = st.executeQuery()) {
        rs.next();
        return (Long[]) rs.getArray(1).getArray();
      }
    });
  }

  private List<PageRow> readPage(Long[] queues, long after) {
    return Sql.autoCommit(ds, "retention page", c -> {
      List<PageRow> rows = new ArrayList<>();
      try (PreparedStatement st = c.prepareStatement(pageSql)) {
        st.setArray(1, c.createArrayOf("bigint", queues));
        st.setLong(2, after);
        try (ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            rows.add(new PageRow(rs.getLong(1), rs.getLong(2), rs.getString(3), rs.getString(4), rs.getLong(5),
                rs.getTimestamp(6), Boolean.TRUE.equals(rs.getObject(7)), rs.getBoolean(8), rs.getBoolean(9)));
          }
        }
      }
      return rows;
    });
  }

  private record Step(int removed, String skipped, Timestamp firstAt, long firstOffset,
      String heldBy, String[] lostGroups, long[] lostCounts, long lostTo) {}

  private Step step(long pid) {
    return Sql.autoCommit(ds, "retention step", c -> {
      try (PreparedStatement st = c.prepareStatement(stepSql)) {
        st.setLong(1, pid);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          return readStep(rs);
        }
      }
    });
  }

  private static Step readStep(ResultSet rs) throws java.sql.SQLException {
    Long first = (Long) rs.getObject(4);
    String[] groups = null;
    long[] counts = null;
    Array ga = rs.getArray(6);
    if (ga != null) {
      groups = (String[]) ga.getArray();
      Long[] cs = (Long[]) rs.getArray(7).getArray();
      counts = new long[cs.length];
      for (int i = 0; i < cs.length; i++) {
        counts[i] = cs[i];
      }
    }
    return new Step(rs.getInt(1), rs.getString(2), rs.getTimestamp(3), first == null ? -1 : first, rs.getString(5),
        groups, counts, rs.getLong(8));
  }

  private void writeState(Map<Long, Oldest> oldest) {
    int n = oldest.size();
    Long[] qids = new Long[n];
    Timestamp[] at = new Timestamp[n];
    String[] part = new String[n];
    Long[] off = new Long[n];
    String[] held = new String[n];
    int i = 0;
    for (Map.Entry<Long, Oldest> e : oldest.entrySet()) {
      qids[i] = e.getKey();
      Oldest o = e.getValue();
      at[i] = o.at;
      part[i] = o.partition;
      off[i] = o.at == null ? null : o.offset;
      held[i] = o.heldBy;
      i++;
    }
    Sql.autoCommit(ds, "retention state", c -> {
      try (PreparedStatement st = c.prepareStatement(stateSql)) {
        st.setArray(1, c.createArrayOf("bigint", qids));
        st.setArray(2, c.createArrayOf("timestamptz", at));
        st.setArray(3, c.createArrayOf("text", part));
        st.setArray(4, c.createArrayOf("bigint", off));
        st.setArray(5, c.createArrayOf("text", held));
        st.executeUpdate();
      }
      return null;
    });
  }
}
