package io.queen.embedded.internal.log;

import io.queen.Names;
import io.queen.PayloadSerializationException;
import io.queen.PushItem;
import io.queen.PushOutcomeUnknownException;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.QueenDatabaseException;
import io.queen.QueenException;
import io.queen.QueueFullException;
import io.queen.embedded.internal.db.LogThrottle;
import io.queen.embedded.internal.db.Sql;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLTransientException;
import java.sql.Types;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import javax.sql.DataSource;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The push path: a push Queen owns (retried, combined per partition by {@link PartitionLanes}, with its wake-ups after
 * the commit) and a push inside a caller's transaction, through the {@code push}, {@code push_fast} and
 * {@code push_partition} functions. Payloads are encoded, checked and sealed here, before any SQL.
 *
 * <p>Over 600 lines: one push's whole way, from encoding and sealing through the choice of the three SQL forms to
 * the retry of an outcome unknown and its reconciliation through the receipts; every step works on the one prepared
 * {@link PushBatch} and its bindings.
 */
public final class Pusher {
  /** SQLState raised by {@code push} when a queue's maxSize would be exceeded. */
  static final String QUEUE_FULL = "QU001";
  /** SQLState raised by {@code push} and {@code push_fast} for a plain payload to an encrypted queue. */
  static final String PLAIN_TO_ENCRYPTED = "QU002";
  /** Logs under Broker's logger, the one an operator knows and configures for all of it. */
  private static final Logger LOG = LoggerFactory.getLogger(Broker.class);

  private final DataSource ds;
  private final JsonCodec codec;
  private final String node;
  private final Wakeups wakeups;
  private final Metrics metrics;
  /** Pushes into one partition from several threads, combined while the partition is busy. */
  private final PartitionLanes lanes;
  private final String pushSql;
  private final String pushFastSql;
  private final String pushPartitionSql;
  private final int maxPayloadBytes;
  private final long pushRetryNanos;
  private final io.queen.PayloadTypes types;
  private final PayloadCipher cipher;
  /** The cluster's key list, which this node's current key must be on before it seals a push. */
  private final KeyRegistry keys;
  private final EncryptionViews encryption;
  private final LogThrottle recoveries = new LogThrottle();

  /** A push met an encrypted queue that this node's view had as plain: nothing was stored. */
  private static final class StaleEncryptionView extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final String queue;

    StaleEncryptionView(String queue) {
      super(null, null, false, false);
      this.queue = queue;
    }
  }

  /**
   * @param pushRetryWindow how long a push Queen owns is tried again after its first transient failure (the
   *     node's {@code connectTimeout})
   */
  Pusher(LogContext log, int maxPayloadBytes, Duration pushRetryWindow, io.queen.PayloadTypes types,
      PayloadCipher cipher, KeyRegistry keys, EncryptionViews encryption) {
    this.ds = log.ds();
    this.codec = log.codec();
    this.node = log.node();
    this.wakeups = log.wakeups();
    this.metrics = log.metrics();
    this.lanes = new PartitionLanes(metrics);
    this.maxPayloadBytes = maxPayloadBytes;
    this.pushRetryNanos = pushRetryWindow.toNanos();
    this.types = types;
    this.cipher = cipher;
    this.keys = keys;
    this.encryption = encryption;
    String schema = log.schema();
    this.pushSql = "select idx, status, message_id, partition_id, msg_offset from " + schema
        + ".push(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?, ?::uuid[], ?::text[], ?::int4[],"
        + " ?::text[], ?::uuid[], ?::int4[])";
    this.pushFastSql = "select pair, partition_id, first_offset from " + schema
        + ".push_fast(?::text[], ?::text[], ?::int4[], ?::int4[], ?::uuid[], ?::text[], ?::text[], ?::text[],"
        + " ?::text[], ?::int4[], ?::text[], ?::uuid[])";
    this.pushPartitionSql = "select partition_id, first_offset from " + schema
        + ".push_partition(?, ?, ?::uuid[], ?::text[], ?::text[], ?::text[], ?::text[], ?::int4[], ?::text[],"
        + " ?::uuid[], ?::int4[])";
  }

  /**
   * Pushes in a transaction Queen owns; after the commit wakes local waiters and notifies other nodes.
   *
   * <p>A transient failure is tried again, with jittered back-off, until {@code connectTimeout} has passed
   * since the first failure. Every item carries a transaction id (the caller's or a generated one) and a
   * message id made here, the same in every try. The first try of a batch without caller ids goes through
   * {@code push_fast} (its ids are fresh, so there is nothing to de-duplicate). A try whose connection was
   * lost while the statement ran may have committed: every later try goes through the de-duplicating
   * {@code push}, and an item it reports {@code duplicate} of a stored message <em>with the message id this
   * call sent for it</em> was stored by that earlier try: it is reported QUEUED (once, from the caller's
   * view). Any other duplicate (a caller's transaction id stored by an earlier, separate push, or repeated
   * within the batch) stays DUPLICATE, exactly as on a first try. Giving up after such a try throws
   * {@link PushOutcomeUnknownException} with the items and the ids used.
   */
  public List<PushResult> push(List<PushItem> items, String defaultQueue) {
    long[] firstFailure = {0}; // one budget for the whole call: the retries of prepare count toward the push's
    PushBatch p = prepareRetrying(items, defaultQueue, firstFailure);
    long since = firstFailure[0];
    List<PushResult> res;
    try {
      res = p.onePartition() && p.queues().length <= PartitionLanes.MAX_ITEMS
          ? lanes.push(p, merged -> pushRetrying(merged, false, since), one -> pushRetrying(one, true, since))
          : pushRetrying(p, true, since);
    } catch (StaleEncryptionView e) {
      // a queue was switched to encryption after this node read its options: nothing was stored; seal and push again
      p = prepare(items, defaultQueue, null);
      try {
        res = pushRetrying(p, true, 0);
      } catch (StaleEncryptionView again) {
        throw new io.queen.EncryptionException(again.queue, "queue '" + again.queue + "' refused a plain payload twice"
            + " although its options were read again: nothing was pushed; push again");
      }
    }
    afterCommit(p.partitionsByQueue());
    metrics.pushed(res);
    return res;
  }

  /**
   * {@link #prepare} (which may read a queue's options), retried on a transient failure like the push itself: nothing
   * is stored before it, so a failure there leaves nothing to reconcile.
   */
  private PushBatch prepareRetrying(List<PushItem> items, String defaultQueue, long[] firstFailure) {
    for (int attempt = 0; ; attempt++) {
      try {
        return prepare(items, defaultQueue, null);
      } catch (QueenDatabaseException e) {
        long now = System.nanoTime();
        if (attempt == 0) {
          firstFailure[0] = now;
        }
        long pause = retryPause(attempt);
        if (!e.isTransient() || now + pause * 1_000_000L - firstFailure[0] >= pushRetryNanos) {
          throw e;
        }
        try {
          Thread.sleep(pause);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw e;
        }
      }
    }
  }

  /**
   * Pushes with retries (see {@link #push(List, String)}), within {@code pushRetryNanos} of the call's first failure
   * ({@code earlierFailure}, 0 while none). With {@code full} false the first try takes the common path
   * only and returns {@code null}, having stored nothing, when the items need the full push (a combined batch of
   * several calls, which then push alone).
   */
  private List<PushResult> pushRetrying(PushBatch p, boolean full, long earlierFailure) {
    long firstFailure = earlierFailure; // System.nanoTime() of the call's first failure, 0 while none
    boolean uncertain = false; // an earlier try may have committed
    for (int attempt = 0; ; attempt++) {
      boolean sent = false;
      // one statement: auto-commit saves the BEGIN/COMMIT round trips
      try (Connection c = ds.getConnection()) {
        if (!c.getAutoCommit()) {
          c.setAutoCommit(true);
        }
        sent = true;
        if (uncertain) {
          List<PushResult> res = reconcile(p, push(c, p, false, true));
          LogThrottle.Decision d = recoveries.admit("push-recovered");
          if (d.level() != LogThrottle.Level.SUPPRESS) {
            LOG.info("{} - a push of {} item(s) whose connection was lost was completed by try {}, de-duplicated by"
                + " transaction id: stored once{}", node, p.queues().length, attempt + 1,
                d.suppressedBefore() > 0 ? " (" + d.suppressedBefore() + " more such pushes in the last minute)" : "");
          }
          return res;
        }
        List<PushResult> fast = p.callerIds() ? null : pushFast(c, p);
        return fast != null || !full ? fast : push(c, p, false, false);
      } catch (SQLException e) {
        boolean lost = sent && Sql.isConnectionLoss(e);
        uncertain |= lost;
        boolean retriable = Sql.isConnectionLoss(e) || Sql.isTransient(e) || e instanceof SQLTransientException;
        long now = System.nanoTime();
        if (firstFailure == 0) {
          firstFailure = now;
        }
        long pause = retryPause(attempt);
        if (retriable && now + pause * 1_000_000L - firstFailure < pushRetryNanos) {
          LOG.debug("{} - push try {} failed ({}); trying again in {} ms", node, attempt + 1, Sql.describe(e), pause);
          try {
            Thread.sleep(pause);
            continue;
          } catch (InterruptedException ie) {
            Thread.currentThread().interrupt(); // give up now, and say how
          }
        }
        QueenException ex = Sql.translate("push", e);
        if (uncertain && ex instanceof QueenDatabaseException qde) {
          throw new PushOutcomeUnknownException(qde, p.itemsWithIds());
        }
        throw ex;
      }
    }
  }

  /** The pause before try {@code attempt + 2}: 10 ms doubling up to 500 ms, jittered over its upper half. */
  private static long retryPause(int attempt) {
    long max = Math.min(500, 10L << Math.min(attempt, 6));
    return max / 2 + java.util.concurrent.ThreadLocalRandom.current().nextLong(max / 2 + 1);
  }

  /**
   * The results of a de-duplicating try that follows a try of unknown outcome: an item reported duplicate of
   * the very message id this call sent for it was stored by the earlier try, so it is QUEUED.
   */
  private static List<PushResult> reconcile(PushBatch p, List<PushResult> res) {
    List<PushResult> out = new ArrayList<>(res.size());
    for (PushResult r : res) {
      out.add(r.isDuplicate() && p.ids()[r.index()].equals(r.messageId())
          ? new PushResult(r.index(), r.queue(), r.partition(), PushStatus.QUEUED, r.messageId(), r.offset(),
              r.transactionId())
          : r);
    }
    return out;
  }

  /**
   * Pushes on the caller's connection, inside the caller's transaction.
   *
   * @param notifyInTransaction NOTIFY inside the transaction (delivered exactly at its commit): for a
   *     transaction Queen does not own, where {@link #afterCommit} cannot know when the commit happens
   */
  public List<PushResult> push(Connection c, List<PushItem> items, String defaultQueue, boolean notifyInTransaction)
      throws SQLException {
    return push(c, prepare(items, defaultQueue, null), notifyInTransaction, false);
  }

  /**
   * Like {@link #push(Connection, List, String, boolean)} with payloads already encoded by
   * {@link #payloadJson} (a transaction checks them when an operation is added).
   */
  public List<PushResult> push(Connection c, List<PushItem> items, List<String> payloadJson, boolean notifyInTransaction)
      throws SQLException {
    try {
      return push(c, prepare(items, null, payloadJson), notifyInTransaction, false);
    } catch (StaleEncryptionView e) {
      throw new io.queen.EncryptionException(e.queue, "queue '" + e.queue + "' was switched to encryption after this node"
          + " read its options: nothing of this transaction was committed; commit it again (it will be sealed)");
    }
  }

  /**
   * The JSON text of a payload, checked against {@code maxPayloadBytes} and the rules of
   * {@link JsonCodec#check}, before any SQL.
   *
   * @param field names the payload in the error, e.g. {@code items[3].payload}
   * @throws PayloadSerializationException naming the field and what is wrong (never the payload)
   */
  public String payloadJson(Object payload, String field) {
    JsonCodec.Encoded e = codec.encode(payload, field, maxPayloadBytes);
    if (e.tooLarge()) {
      throw new PayloadSerializationException(field + " is " + e.bytes() + " bytes of JSON; the limit is "
          + maxPayloadBytes + " (maxPayloadBytes)", null);
    }
    return e.text();
  }

  public int maxPayloadBytes() {
    return maxPayloadBytes;
  }

  /**
   * After a push or a transaction Queen owns committed: wakes this node's waiters of the queues at once and has the
   * notifier tell the other nodes, naming the partitions that got messages, queue by queue (the consume loops pop
   * those partitions instead of scanning).
   */
  public void afterCommit(Map<String, Set<String>> partitionsByQueue) {
    partitionsByQueue.forEach(wakeups::wake);
    wakeups.notifyOthers(partitionsByQueue);
  }

  /** Wakes this node's waiters of the queues (they pop, and wait again if nothing is visible yet). */
  public void wakeLocal(Set<String> queues) {
    for (String q : queues) {
      wakeups.wake(q);
    }
  }

  /**
   * The common push (existing partitions, unbounded queues, only generated transaction ids, first try)
   * through {@code push_fast} ({@code push_partition} when every item names the same partition): items grouped
   * by partition here, offsets = the partition's first offset + the item's rank; the ids made in {@link #prepare}
   * are stored as they are (fresh, so no de-duplication is needed). Returns {@code null}, having changed nothing,
   * when the batch needs the full push.
   */
  private List<PushResult> pushFast(Connection c, PushBatch p) throws SQLException {
    int n = p.queues().length;
    java.util.Map<String, Integer> pairIndex = new java.util.LinkedHashMap<>();
    List<String> pairQueues = new ArrayList<>();
    List<String> pairPartitions = new ArrayList<>();
    List<Integer> pairCount = new ArrayList<>();
    Integer[] itemPair = new Integer[n];
    Integer[] itemRank = new Integer[n];
    UUID[] ids = p.ids();
    for (int i = 0; i < n; i++) {
      String key = p.queues()[i] + '\u0000' + p.partitions()[i];
      Integer k = pairIndex.get(key);
      if (k == null) {
        k = pairQueues.size();
        pairIndex.put(key, k);
        pairQueues.add(p.queues()[i]);
        pairPartitions.add(p.partitions()[i]);
        pairCount.add(0);
      }
      itemPair[i] = k + 1;
      itemRank[i] = pairCount.get(k);
      pairCount.set(k, itemRank[i] + 1);
    }
    int m = pairQueues.size();
    if (m == 1) {
      return pushPartition(c, p);
    }
    // a partition with two or more items, which are one run of ids ranked as here, gets one receipt and its items
    // no transaction-id index entry; a single item keeps its entry. A single item gets no receipt because a receipt is
    // kept for pushReceiptRetention (a day by default) and an index entry only as long as its message: a queue of
    // spread single items would otherwise hold a day of receipt rows, one per message.
    UUID[] pairAnchor = new UUID[m];
    for (int i = 0; i < n; i++) {
      int k = itemPair[i] - 1;
      if (itemRank[i] == 0 && pairCount.get(k) >= 2) {
        pairAnchor[k] = MessageIds.anchor(ids[i]);
      }
    }
    for (int i = 0; i < n; i++) {
      UUID a = pairAnchor[itemPair[i] - 1];
      if (a != null && (MessageIds.rank(ids[i]) != itemRank[i] || !MessageIds.anchor(ids[i]).equals(a))) {
        pairAnchor[itemPair[i] - 1] = null;
      }
    }
    String[] txn = new String[n];
    boolean anyAnchor = false;
    for (int i = 0; i < n; i++) {
      boolean covered = pairAnchor[itemPair[i] - 1] != null;
      txn[i] = covered ? null : p.txnIds()[i];
      anyAnchor |= covered;
    }
    long[] first = new long[m + 1];
    int rows = 0;
    try (PreparedStatement st = c.prepareStatement(pushFastSql)) {
      st.setArray(1, c.createArrayOf("text", pairQueues.toArray()));
      st.setArray(2, c.createArrayOf("text", pairPartitions.toArray()));
      st.setArray(3, c.createArrayOf("int4", itemPair));
      st.setArray(4, c.createArrayOf("int4", itemRank));
      st.setArray(5, c.createArrayOf("uuid", ids));
      st.setArray(6, c.createArrayOf("text", p.payloads()));
      st.setArray(7, c.createArrayOf("text", p.traceIds()));
      st.setArray(8, c.createArrayOf("text", txn));
      bindTyped(c, st, 9, p);
      if (anyAnchor) {
        st.setArray(12, c.createArrayOf("uuid", pairAnchor));
      } else {
        st.setNull(12, Types.ARRAY);
      }
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          first[rs.getInt(1)] = rs.getLong(3);
          rows++;
        }
      }
    } catch (PSQLException e) {
      staleEncryption(e);
      throw e;
    }
    if (rows < m) {
      return null; // nothing was written: a partition or queue is missing, or a queue is bounded
    }
    List<PushResult> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(new PushResult(i, p.queues()[i], p.partitions()[i], PushStatus.QUEUED, ids[i], first[itemPair[i]] + itemRank[i],
          p.txnIds()[i]));
    }
    return out;
  }

  /**
   * {@link #pushFast} for a batch into one partition, through {@code push_partition}: one update finds the
   * partition, locks it and moves its {@code next_offset}, the items go in at the returned first offset + their
   * position. Returns {@code null}, having changed nothing, when the batch needs the full push.
   */
  private List<PushResult> pushPartition(Connection c, PushBatch p) throws SQLException {
    // runs of two or more items whose ids are one run, in rank order (one call's items; a combined push holds several
    // calls): one receipt each, and their items no transaction-id index entry
    int n = p.queues().length;
    String[] txn = p.txnIds();
    List<UUID> anchors = null;
    List<Integer> starts = null;
    for (int i = 0; i < n; ) {
      UUID a = MessageIds.anchor(p.ids()[i]);
      int j = i;
      while (j < n && MessageIds.rank(p.ids()[j]) == j - i && MessageIds.anchor(p.ids()[j]).equals(a)) {
        j++;
      }
      if (j - i >= 2) {
        if (anchors == null) {
          anchors = new ArrayList<>();
          starts = new ArrayList<>();
          txn = p.txnIds().clone();
        }
        anchors.add(a);
        starts.add(i);
        Arrays.fill(txn, i, j, null);
      }
      i = Math.max(j, i + 1);
    }
    long first;
    try (PreparedStatement st = c.prepareStatement(pushPartitionSql)) {
      st.setString(1, p.queues()[0]);
      st.setString(2, p.partitions()[0]);
      st.setArray(3, c.createArrayOf("uuid", p.ids()));
      st.setArray(4, c.createArrayOf("text", p.payloads()));
      st.setArray(5, c.createArrayOf("text", p.traceIds()));
      st.setArray(6, c.createArrayOf("text", txn));
      bindTyped(c, st, 7, p);
      if (anchors != null) {
        st.setArray(10, c.createArrayOf("uuid", anchors.toArray()));
        st.setArray(11, c.createArrayOf("int4", starts.toArray()));
      } else {
        st.setNull(10, Types.ARRAY);
        st.setNull(11, Types.ARRAY);
      }
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        first = rs.getLong(2);
        if (rs.wasNull()) {
          return null; // nothing was written: the partition or queue is missing, the queue is bounded, or a payload is plain
        }
      }
    }
    List<PushResult> out = new ArrayList<>(p.queues().length);
    for (int i = 0; i < p.queues().length; i++) {
      out.add(new PushResult(i, p.queues()[i], p.partitions()[i], PushStatus.QUEUED, p.ids()[i], first + i, p.txnIds()[i]));
    }
    return out;
  }

  private PushBatch prepare(List<PushItem> items, String defaultQueue, List<String> payloadJson) {
    Objects.requireNonNull(items, "items must not be null");
    if (items.isEmpty()) {
      throw new IllegalArgumentException("push: items must not be empty");
    }
    if (items.size() > 100_000) {
      throw new IllegalArgumentException("push: at most 100000 items per batch, was " + items.size());
    }
    int n = items.size();
    String[] qs = new String[n];
    String[] ps = new String[n];
    String[] pl = new String[n];
    String[] tx = new String[n];
    String[] tr = new String[n];
    UUID[] ids = new UUID[n];
    String[] ty = null;
    Integer[] ve = null;
    boolean callerIds = false;
    MessageIds.Runs runs = new MessageIds.Runs();
    for (int i = 0; i < n; i++) {
      PushItem it = Objects.requireNonNull(items.get(i), "items[" + i + "]");
      String q = it.queue() != null ? it.queue() : defaultQueue;
      if (q == null) {
        throw new IllegalArgumentException("items[" + i + "].queue is missing: use PushItem.to(queue, partition, payload)");
      }
      qs[i] = Names.queue(q);
      ps[i] = it.partition();
      pl[i] = payloadJson != null ? payloadJson.get(i) : payloadJson(it.payload(), "items[" + i + "].payload");
      ids[i] = runs.next(qs[i], ps[i]);
      callerIds |= it.transactionId() != null;
      tx[i] = it.transactionId() != null ? it.transactionId() : ids[i].toString();
      tr[i] = it.traceId();
      io.queen.PayloadTypes.Type t = types.typeOf(it.payload().getClass());
      if (t != null) {
        if (ty == null) {
          ty = new String[n];
          ve = new Integer[n];
        }
        ty[i] = t.name();
        ve[i] = t.version();
      }
    }
    String[] kid = null;
    String last = null;
    boolean lastOn = false;
    for (int i = 0; i < n; i++) {
      if (!qs[i].equals(last)) {
        last = qs[i];
        lastOn = encryption.encrypted(last, "push");
        if (lastOn && cipher.canSeal()) {
          keys.requireListed(last);
        }
      }
      if (lastOn) {
        if (!cipher.canSeal()) {
          throw new io.queen.EncryptionException(last, EncryptionViews.noKey(last, "push to") + "; nothing was pushed");
        }
        if (kid == null) {
          kid = new String[n];
        }
        pl[i] = cipher.seal(pl[i], ids[i]);
        kid[i] = cipher.currentId();
      }
    }
    return new PushBatch(qs, ps, pl, tx, tr, ids, callerIds, items, ty, ve, kid);
  }

  /**
   * Binds the type names, versions and key ids of a push from {@code first} on: SQL NULL for a batch without
   * typed (or sealed) payloads, so the common push sends nothing more.
   */
  private static void bindTyped(Connection c, PreparedStatement st, int first, PushBatch p) throws SQLException {
    if (p.types() == null) {
      st.setNull(first, Types.ARRAY);
      st.setNull(first + 1, Types.ARRAY);
    } else {
      st.setArray(first, c.createArrayOf("text", p.types()));
      st.setArray(first + 1, c.createArrayOf("int4", p.versions()));
    }
    if (p.keyIds() == null) {
      st.setNull(first + 2, Types.ARRAY);
    } else {
      st.setArray(first + 2, c.createArrayOf("text", p.keyIds()));
    }
  }

  /** A refusal of a plain payload by an encrypted queue: forget the view of it and say so. */
  private void staleEncryption(PSQLException e) {
    if (PLAIN_TO_ENCRYPTED.equals(e.getSQLState())) {
      ServerErrorMessage m = e.getServerErrorMessage();
      String queue = m != null && m.getDetail() != null ? m.getDetail() : "?";
      encryption.forget(queue);
      throw new StaleEncryptionView(queue);
    }
  }

  /**
   * The de-duplicating push. {@code afterUnknown}: a try of this call may have committed, so the generated ids are
   * looked up too; a caller's transaction id that has the form of a generated id (the items of a
   * {@link PushOutcomeUnknownException}) is looked up in any case. Such an id may have been stored without an
   * index entry, under a receipt: the look-up passes its run's first id and its rank.
   */
  private List<PushResult> push(Connection c, PushBatch p, boolean notify, boolean afterUnknown) throws SQLException {
    int n = p.queues().length;
    List<PushResult> out = new ArrayList<>(n);
    UUID[] anchors = null;
    Integer[] ranks = null;
    for (int i = 0; i < n; i++) {
      boolean generated = p.txnIds()[i].equals(p.ids()[i].toString());
      UUID named = generated ? (afterUnknown ? p.ids()[i] : null) : MessageIds.generatedForm(p.txnIds()[i]);
      if (named != null) {
        if (anchors == null) {
          anchors = new UUID[n];
          ranks = new Integer[n];
        }
        anchors[i] = MessageIds.anchor(named);
        ranks[i] = MessageIds.rank(named);
      }
    }
    try (PreparedStatement st = c.prepareStatement(pushSql)) {
      st.setArray(1, c.createArrayOf("text", p.queues()));
      st.setArray(2, c.createArrayOf("text", p.partitions()));
      st.setArray(3, c.createArrayOf("text", p.payloads()));
      st.setArray(4, c.createArrayOf("text", p.txnIds()));
      st.setArray(5, c.createArrayOf("text", p.traceIds()));
      st.setBoolean(6, notify);
      st.setArray(7, c.createArrayOf("uuid", p.ids()));
      bindTyped(c, st, 8, p);
      if (anchors != null) {
        st.setArray(11, c.createArrayOf("uuid", anchors));
        st.setArray(12, c.createArrayOf("int4", ranks));
      } else {
        st.setNull(11, Types.ARRAY);
        st.setNull(12, Types.ARRAY);
      }
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          int i = rs.getInt(1) - 1;
          out.add(new PushResult(i, p.queues()[i], p.partitions()[i],
              "duplicate".equals(rs.getString(2)) ? PushStatus.DUPLICATE : PushStatus.QUEUED,
              rs.getObject(3, UUID.class), rs.getLong(5), p.txnIds()[i]));
        }
      }
    } catch (PSQLException e) {
      staleEncryption(e);
      if (QUEUE_FULL.equals(e.getSQLState())) {
        ServerErrorMessage m = e.getServerErrorMessage();
        String queue = m != null && m.getDetail() != null ? m.getDetail() : "?";
        long max = m != null && m.getHint() != null ? Long.parseLong(m.getHint()) : -1;
        java.util.regex.Matcher counts = m == null || m.getMessage() == null ? null
            : FULL_COUNTS.matcher(m.getMessage());
        throw new QueueFullException(queue, max,
            counts != null && counts.find() ? counts.group(1) + " stored + " + counts.group(2) + " pushed" : null);
      }
      throw e;
    }
    return out;
  }

  /** The counts in push's "queue ... is full: S stored + P pushed > maxSize M" (the queue and M come apart). */
  private static final java.util.regex.Pattern FULL_COUNTS =
      java.util.regex.Pattern.compile("(\\d+) stored \\+ (\\d+) pushed");
}
