package io.queen.embedded.internal.log;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;
import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Names;
import io.queen.PayloadSerializationException;
import io.queen.PushItem;
import io.queen.PushOutcomeUnknownException;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.QueenException;
import io.queen.QueueConfig;
import io.queen.QueueFullException;
import io.queen.embedded.internal.db.LogThrottle;
import io.queen.embedded.internal.db.Sql;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLTransientException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The log operations (push, pop, ack, renew, release) as calls of the SQL functions in
 * {@code sql/functions/}. Methods taking a {@link Connection} run inside the caller's transaction (the
 * transaction bundle uses them); the others own their transaction.
 */
public final class Broker {
  /** SQLState raised by {@code push} when a queue's maxSize would be exceeded. */
  static final String QUEUE_FULL = "QU001";
  private static final Logger LOG = LoggerFactory.getLogger(Broker.class);

  private final DataSource ds;
  private final String schema;
  private final JsonCodec codec;
  private final String node;
  private final Wakeups wakeups;
  private final Metrics metrics;
  /** Pushes into one partition from several threads, combined while the partition is busy. */
  private final PartitionLanes lanes;
  private final String pushSql;
  private final String pushFastSql;
  private final String pushPartitionSql;
  private final String popSql;
  /**
   * Where this node's last pop of each queue and group stopped (its last partition id): the next pop starts after
   * it and wraps around, so every ready partition gets its turn.
   */
  private final ConcurrentHashMap<String, Long> popPositions = new ConcurrentHashMap<>();
  private final String ackSql;
  private final String ackKeepingBusySql;
  private final String renewSql;
  private final String releaseSql;
  private final String shrinkSql;
  private final String deadLetterAutoAckedSql;
  private final int maxPayloadBytes;
  private final long pushRetryNanos;
  private final io.queen.PayloadTypes types;
  private final PayloadCipher cipher;
  /** The cluster's key list, which this node's current key must be on before it seals a push. */
  private final KeyRegistry keys;
  /** The ids of the keys this node holds, as pop takes them: it leases no partition whose next message needs another. */
  private final String[] keyIds;
  /** Whether a queue has encryption on, as this node last read it, until when (System.nanoTime). */
  private final java.util.concurrent.ConcurrentHashMap<String, EncryptionView> encryptedQueues =
      new java.util.concurrent.ConcurrentHashMap<>();
  /** How long this node trusts its view of a queue's encryption option; push and push_fast check it anyway. */
  private static final long ENCRYPTION_VIEW_NANOS = 5_000_000_000L;
  /** SQLState raised by {@code push} and {@code push_fast} for a plain payload to an encrypted queue. */
  static final String PLAIN_TO_ENCRYPTED = "QU002";

  private record EncryptionView(boolean on, long until) {}

  /** A push met an encrypted queue that this node's view had as plain: nothing was stored. */
  private static final class StaleEncryptionView extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final String queue;

    StaleEncryptionView(String queue) {
      super(null, null, false, false);
      this.queue = queue;
    }
  }
  private final LogThrottle recoveries = new LogThrottle();

  /**
   * @param pushRetryWindow how long a push Queen owns is tried again after its first transient failure (the
   *     node's {@code connectTimeout})
   */
  private final GroupActivity activity = new GroupActivity();

  public Broker(DataSource ds, String schema, JsonCodec codec, String node, Wakeups wakeups, Metrics metrics,
      int maxPayloadBytes, Duration pushRetryWindow, io.queen.PayloadTypes types, PayloadCipher cipher) {
    this.ds = ds;
    this.cipher = Objects.requireNonNull(cipher, "cipher must not be null");
    this.keyIds = cipher.ids().toArray(new String[0]);
    this.types = Objects.requireNonNull(types, "types must not be null");
    this.pushRetryNanos = pushRetryWindow.toNanos();
    this.maxPayloadBytes = maxPayloadBytes;
    this.metrics = metrics;
    this.lanes = new PartitionLanes(metrics);
    this.schema = Sql.quoteIdent(schema);
    this.codec = codec;
    this.node = node;
    this.wakeups = wakeups;
    this.keys = new KeyRegistry(ds, this.schema, cipher, node);
    this.pushSql = "select idx, status, message_id, partition_id, msg_offset from " + this.schema
        + ".push(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?, ?::uuid[], ?::text[], ?::int4[],"
        + " ?::text[], ?::uuid[], ?::int4[])";
    this.pushFastSql = "select pair, partition_id, first_offset from " + this.schema
        + ".push_fast(?::text[], ?::text[], ?::int4[], ?::int4[], ?::uuid[], ?::text[], ?::text[], ?::text[],"
        + " ?::text[], ?::int4[], ?::text[], ?::uuid[])";
    this.pushPartitionSql = "select partition_id, first_offset from " + this.schema
        + ".push_partition(?, ?, ?::uuid[], ?::text[], ?::text[], ?::text[], ?::text[], ?::int4[], ?::text[],"
        + " ?::uuid[], ?::int4[])";
    // pop returns each row with its payload type, version and encryption key id
    this.popSql = "select partition_name, partition_id, msg_offset, message_id, transaction_id, trace_id, payload::text,"
        + " created_at, lease_id, attempt, payload_type, payload_version, key_id from " + this.schema
        + ".pop(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::text[], ?::text[])";
    this.ackSql = "select idx, outcome from " + this.schema
        + ".ack(?::bigint[], ?::text[], ?::bigint[], ?::text[]::uuid[], ?::text[], ?::text[])";
    // the consume loop's acks leave a busy partition's has_pending flag set (it pops the partitions pushes name)
    this.ackKeepingBusySql = "select idx, outcome from " + this.schema
        + ".ack(?::bigint[], ?::text[], ?::bigint[], ?::text[]::uuid[], ?::text[], ?::text[], true)";
    this.renewSql = "select partition_id from " + this.schema + ".renew(?::bigint[], ?::text[], ?::text[]::uuid[])";
    this.releaseSql = "select " + this.schema + ".release(?::bigint[], ?::text[], ?::text[]::uuid[])";
    this.shrinkSql = "select " + this.schema + ".shrink_lease(?, ?, ?, ?)";
    this.deadLetterAutoAckedSql = "insert into " + this.schema + ".dead_letters(queue_id, partition_id, \"offset\","
        + " group_name, message_id, error, attempts) select q.id, m.partition_id, m.\"offset\", ?, m.id, ?, 1 from "
        + this.schema + ".messages m join " + this.schema + ".partitions p on p.id = m.partition_id join " + this.schema
        + ".queues q on q.id = p.queue_id where m.partition_id = ? and m.\"offset\" = ? and q.dead_letter";
  }

  public String schema() {
    return schema;
  }

  public DataSource dataSource() {
    return ds;
  }

  public JsonCodec codec() {
    return codec;
  }

  public String node() {
    return node;
  }

  // ------------------------------------------------------------------------------------------- push

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
    Prepared p = prepareRetrying(items, defaultQueue, firstFailure);
    long since = firstFailure[0];
    List<PushResult> res;
    try {
      res = p.onePartition() && p.queues.length <= PartitionLanes.MAX_ITEMS
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
  private Prepared prepareRetrying(List<PushItem> items, String defaultQueue, long[] firstFailure) {
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
  private List<PushResult> pushRetrying(Prepared p, boolean full, long earlierFailure) {
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
                + " transaction id: stored once{}", node, p.queues.length, attempt + 1,
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
  private static List<PushResult> reconcile(Prepared p, List<PushResult> res) {
    List<PushResult> out = new ArrayList<>(res.size());
    for (PushResult r : res) {
      out.add(r.isDuplicate() && p.ids[r.index()].equals(r.messageId())
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

  // ------------------------------------------------------------------------------------ encryption

  /**
   * Whether the queue has encryption on, from this node's view (read again after 5 s, or after a refusal).
   * {@code operation} names the call in a failure ("push", "pop"): it is that call that failed.
   */
  public boolean encrypted(String queue, String operation) {
    EncryptionView v = encryptedQueues.get(queue);
    if (v != null && v.until - System.nanoTime() > 0) {
      return v.on;
    }
    boolean on = Sql.autoCommit(ds, operation, c -> {
      try (PreparedStatement st = c.prepareStatement("select encryption from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next() && rs.getBoolean(1);
        }
      }
    });
    long now = System.nanoTime();
    if (encryptedQueues.size() >= 1024) { // views of queues not used for a while (deleted on another node, say) go
      encryptedQueues.values().removeIf(view -> view.until - now <= 0);
    }
    encryptedQueues.put(queue, new EncryptionView(on, now + ENCRYPTION_VIEW_NANOS));
    return on;
  }

  /** The node's payload cipher (its current and older keys). */
  public PayloadCipher cipher() {
    return cipher;
  }

  /** The cluster's key list as this node checks it. */
  public KeyRegistry keys() {
    return keys;
  }

  static String noKey(String queue, String what) {
    return "queue '" + queue + "' has encryption on and this node has no encryption key, so it does not " + what
        + " it: start the node with the cluster's key (builder encryptionKey(...) or the environment variable"
        + " QUEEN_ENCRYPTION_KEY, 64 hex digits), or switch the queue's encryption off";
  }

  /** The error for a stored message sealed under a key this node does not hold (ids only, never keys). */
  public String missingKey(String queue, String keyId) {
    return "queue '" + queue + "' holds messages sealed under key id " + keyId + ", which this node does not hold (it"
        + " holds " + (cipher.ids().isEmpty() ? "no key" : "key id(s) " + cipher.ids()) + "): add that key to the"
        + " builder's oldEncryptionKeys(...) (or QUEEN_ENCRYPTION_OLD_KEYS) after a rotation, or start the node with"
        + " the cluster's key";
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
   * A push's arrays, in request order: every item has a message id made here and a transaction id (the
   * caller's, or the text of the message id); {@code callerIds} when any item brought its own.
   */
  record Prepared(String[] queues, String[] partitions, String[] payloads, String[] txnIds, String[] traceIds,
      UUID[] ids, boolean callerIds, List<PushItem> items, String[] types, Integer[] versions, String[] keyIds) {
    /** The partitions pushed to, queue by queue. */
    Map<String, Set<String>> partitionsByQueue() {
      Map<String, Set<String>> out = new java.util.HashMap<>();
      for (int i = 0; i < queues.length; i++) {
        out.computeIfAbsent(queues[i], q -> new java.util.HashSet<>()).add(partitions[i]);
      }
      return out;
    }

    /** Whether every item names the same queue and partition (and none brings its own transaction id). */
    boolean onePartition() {
      for (int i = 1; i < queues.length; i++) {
        if (!queues[i].equals(queues[0]) || !partitions[i].equals(partitions[0])) {
          return false;
        }
      }
      return !callerIds;
    }

    /** The items of several prepared pushes as one, in order. */
    static Prepared concat(List<Prepared> parts) {
      int n = 0;
      boolean typed = false;
      boolean sealed = false;
      for (Prepared p : parts) {
        n += p.queues.length;
        typed |= p.types != null;
        sealed |= p.keyIds != null;
      }
      String[] qs = new String[n];
      String[] ps = new String[n];
      String[] pl = new String[n];
      String[] tx = new String[n];
      String[] tr = new String[n];
      UUID[] ids = new UUID[n];
      String[] ty = typed ? new String[n] : null;
      Integer[] ve = typed ? new Integer[n] : null;
      String[] kid = sealed ? new String[n] : null;
      List<PushItem> items = new ArrayList<>(n);
      boolean callerIds = false;
      int at = 0;
      for (Prepared p : parts) {
        int k = p.queues.length;
        System.arraycopy(p.queues, 0, qs, at, k);
        System.arraycopy(p.partitions, 0, ps, at, k);
        System.arraycopy(p.payloads, 0, pl, at, k);
        System.arraycopy(p.txnIds, 0, tx, at, k);
        System.arraycopy(p.traceIds, 0, tr, at, k);
        System.arraycopy(p.ids, 0, ids, at, k);
        if (p.types != null) {
          System.arraycopy(p.types, 0, ty, at, k);
          System.arraycopy(p.versions, 0, ve, at, k);
        }
        if (p.keyIds != null) {
          System.arraycopy(p.keyIds, 0, kid, at, k);
        }
        items.addAll(p.items);
        callerIds |= p.callerIds;
        at += k;
      }
      return new Prepared(qs, ps, pl, tx, tr, ids, callerIds, items, ty, ve, kid);
    }

    /** The items with their queue, partition and transaction id filled in, for a retry by the caller. */
    List<PushItem> itemsWithIds() {
      List<PushItem> out = new ArrayList<>(items.size());
      for (int i = 0; i < items.size(); i++) {
        PushItem it = items.get(i);
        out.add(new PushItem(queues[i], partitions[i], it.payload(), txnIds[i], it.traceId()));
      }
      return out;
    }
  }

  /**
   * The common push (existing partitions, unbounded queues, only generated transaction ids, first try)
   * through {@code push_fast} ({@code push_partition} when every item names the same partition): items grouped
   * by partition here, offsets = the partition's first offset + the item's rank; the ids made in {@link #prepare}
   * are stored as they are (fresh, so no de-duplication is needed). Returns {@code null}, having changed nothing,
   * when the batch needs the full push.
   */
  private List<PushResult> pushFast(Connection c, Prepared p) throws SQLException {
    int n = p.queues.length;
    java.util.Map<String, Integer> pairIndex = new java.util.LinkedHashMap<>();
    List<String> pairQueues = new ArrayList<>();
    List<String> pairPartitions = new ArrayList<>();
    List<Integer> pairCount = new ArrayList<>();
    Integer[] itemPair = new Integer[n];
    Integer[] itemRank = new Integer[n];
    UUID[] ids = p.ids;
    for (int i = 0; i < n; i++) {
      String key = p.queues[i] + '\u0000' + p.partitions[i];
      Integer k = pairIndex.get(key);
      if (k == null) {
        k = pairQueues.size();
        pairIndex.put(key, k);
        pairQueues.add(p.queues[i]);
        pairPartitions.add(p.partitions[i]);
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
        pairAnchor[k] = anchor(ids[i]);
      }
    }
    for (int i = 0; i < n; i++) {
      UUID a = pairAnchor[itemPair[i] - 1];
      if (a != null && (rank(ids[i]) != itemRank[i] || !anchor(ids[i]).equals(a))) {
        pairAnchor[itemPair[i] - 1] = null;
      }
    }
    String[] txn = new String[n];
    boolean anyAnchor = false;
    for (int i = 0; i < n; i++) {
      boolean covered = pairAnchor[itemPair[i] - 1] != null;
      txn[i] = covered ? null : p.txnIds[i];
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
      st.setArray(6, c.createArrayOf("text", p.payloads));
      st.setArray(7, c.createArrayOf("text", p.traceIds));
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
      out.add(new PushResult(i, p.queues[i], p.partitions[i], PushStatus.QUEUED, ids[i], first[itemPair[i]] + itemRank[i],
          p.txnIds[i]));
    }
    return out;
  }

  /**
   * {@link #pushFast} for a batch into one partition, through {@code push_partition}: one update finds the
   * partition, locks it and moves its {@code next_offset}, the items go in at the returned first offset + their
   * position. Returns {@code null}, having changed nothing, when the batch needs the full push.
   */
  private List<PushResult> pushPartition(Connection c, Prepared p) throws SQLException {
    // runs of two or more items whose ids are one run, in rank order (one call's items; a combined push holds several
    // calls): one receipt each, and their items no transaction-id index entry
    int n = p.queues.length;
    String[] txn = p.txnIds;
    List<UUID> anchors = null;
    List<Integer> starts = null;
    for (int i = 0; i < n; ) {
      UUID a = anchor(p.ids[i]);
      int j = i;
      while (j < n && rank(p.ids[j]) == j - i && anchor(p.ids[j]).equals(a)) {
        j++;
      }
      if (j - i >= 2) {
        if (anchors == null) {
          anchors = new ArrayList<>();
          starts = new ArrayList<>();
          txn = p.txnIds.clone();
        }
        anchors.add(a);
        starts.add(i);
        Arrays.fill(txn, i, j, null);
      }
      i = Math.max(j, i + 1);
    }
    long first;
    try (PreparedStatement st = c.prepareStatement(pushPartitionSql)) {
      st.setString(1, p.queues[0]);
      st.setString(2, p.partitions[0]);
      st.setArray(3, c.createArrayOf("uuid", p.ids));
      st.setArray(4, c.createArrayOf("text", p.payloads));
      st.setArray(5, c.createArrayOf("text", p.traceIds));
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
    List<PushResult> out = new ArrayList<>(p.queues.length);
    for (int i = 0; i < p.queues.length; i++) {
      out.add(new PushResult(i, p.queues[i], p.partitions[i], PushStatus.QUEUED, p.ids[i], first + i, p.txnIds[i]));
    }
    return out;
  }

  /** The last 60-bit time-and-sequence prefix handed out by {@link #timeOrderedUuid} in this JVM. */
  private static final java.util.concurrent.atomic.AtomicLong LAST_ID_PREFIX = new java.util.concurrent.atomic.AtomicLong();

  /** The low bits of a generated id that number the items of one partition in one push (at most 100,000 < 2^17). */
  static final int RANK_BITS = 17;
  private static final long RANK_MASK = (1L << RANK_BITS) - 1;

  /**
   * A version 7 UUID (RFC 9562) to number a run of messages from: 48 bits of Unix time in milliseconds, the version
   * (7), 12 bits of a sequence that makes runs of the same millisecond increase (RFC 9562's "method 1"; it carries
   * into the time field when more than 4096 are made in one millisecond), the variant, 45 random bits from the
   * thread's generator and 17 zero bits. The run's messages take this id + their rank (0, 1, 2, ...) in those low
   * bits. So ids made in this JVM never repeat and increase within a run and from one run to the next, ids of
   * different JVMs are ordered by millisecond, and {@link #anchor} of any id of the run is the run's first id (one
   * compare-and-set per run; no lock shared by pushers). Not secret.
   */
  static UUID timeOrderedUuid() {
    long now = System.currentTimeMillis() << 12;
    long prev;
    long next;
    do {
      prev = LAST_ID_PREFIX.get();
      next = Math.max(now, prev + 1);
    } while (!LAST_ID_PREFIX.compareAndSet(prev, next));
    long msb = ((next >>> 12) << 16) | 0x7000L | (next & 0xfffL);
    long lsb = (java.util.concurrent.ThreadLocalRandom.current().nextLong() & 0x3fffffffffffffffL & ~RANK_MASK)
        | 0x8000000000000000L;
    return new UUID(msb, lsb);
  }

  /** A popped message's transaction id: one stored under a receipt has none in its row, and is its id. */
  private static String transactionId(String stored, UUID id) {
    return stored != null ? stored : id.toString();
  }

  /** Receipts removed per statement by {@link #forgetOldReceipts}. */
  static final int RECEIPT_CHUNK = 10_000;

  /**
   * Janitor: removes the receipts of pushes older than {@code retention} (the node's pushReceiptRetention; by the time
   * in their ids, through the primary key, {@link #RECEIPT_CHUNK} at a time, at most {@code maxChunks} statements): a
   * push of {@link PushOutcomeUnknownException#items()} finds a receipt for so long. Returns how many it removed.
   */
  public static long forgetOldReceipts(DataSource ds, String quotedSchema, Duration retention, int maxChunks) {
    long cutoffMillis = System.currentTimeMillis() - retention.toMillis();
    UUID bound = new UUID(cutoffMillis << 16, 0L); // below every id made in that millisecond or later (idMillis)
    long removed = 0;
    for (int chunk = 0; chunk < maxChunks; chunk++) {
      int n = Sql.inTransaction(ds, "remove old push receipts", c -> {
        Sql.indexPlansOnly(c); // receipts through their key: a table a vacuum found empty is taken for one row
        try (PreparedStatement st = c.prepareStatement("delete from " + quotedSchema + ".push_receipts where anchor in"
            + " (select anchor from " + quotedSchema + ".push_receipts where anchor < ? order by anchor limit ?)")) {
          st.setObject(1, bound);
          st.setInt(2, RECEIPT_CHUNK);
          return st.executeUpdate();
        }
      });
      removed += n;
      if (n < RECEIPT_CHUNK) {
        break;
      }
    }
    return removed;
  }

  /** What is left after a pass of {@link #forgetOldReceipts}: rows (PostgreSQL's estimate) and the oldest one's age. */
  public record ReceiptsLeft(long rows, double oldestAgeSeconds) {}

  /**
   * The push receipts left: the table's row estimate from {@code pg_class} (a count would read the whole table, which
   * holds the retention's worth of pushes) and the age of the oldest receipt, from the time in the first anchor of the
   * primary key.
   */
  public static ReceiptsLeft receiptsLeft(DataSource ds, String quotedSchema) {
    return Sql.inTransaction(ds, "read the push receipts left", c -> {
      Sql.indexPlansOnly(c); // receipts through their key: a table a vacuum found empty is taken for one row
      try (PreparedStatement st = c.prepareStatement("select greatest(c.reltuples, 0)::bigint,"
          + " (select r.anchor from " + quotedSchema + ".push_receipts r order by r.anchor limit 1)"
          + " from pg_class c where c.oid = ?::regclass")) {
        st.setString(1, quotedSchema + ".push_receipts");
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          UUID oldest = rs.getObject(2, UUID.class);
          double age = oldest == null ? 0
              : Math.max(0, System.currentTimeMillis() - idMillis(oldest)) / 1000.0;
          return new ReceiptsLeft(oldest == null ? 0 : Math.max(1, rs.getLong(1)), age);
        }
      }
    });
  }

  /** The Unix time in milliseconds in a generated id's first 48 bits (see {@link #timeOrderedUuid}). */
  static long idMillis(UUID id) {
    return id.getMostSignificantBits() >>> 16;
  }

  /** The first id of the run a generated id belongs to (its rank bits cleared). */
  static UUID anchor(UUID id) {
    return new UUID(id.getMostSignificantBits(), id.getLeastSignificantBits() & ~RANK_MASK);
  }

  /** A generated id's rank in its run. */
  static int rank(UUID id) {
    return (int) (id.getLeastSignificantBits() & RANK_MASK);
  }

  /**
   * The id a transaction id names when it has the form of an id Queen generates (a lower-case version 7 UUID), for
   * the receipt look-up of a push of {@link PushOutcomeUnknownException#items()}; {@code null} otherwise.
   */
  static UUID generatedForm(String transactionId) {
    if (transactionId == null || transactionId.length() != 36 || transactionId.charAt(14) != '7') {
      return null;
    }
    try {
      UUID u = UUID.fromString(transactionId);
      return u.variant() == 2 && u.toString().equals(transactionId) ? u : null;
    } catch (IllegalArgumentException e) {
      return null;
    }
  }

  /**
   * The message ids of one push: the items of one partition are one run ({@link #timeOrderedUuid} + their rank), so
   * that one receipt row can stand for all of them.
   */
  private static final class Runs {
    private String lastQueue;
    private String lastPartition;
    private long[] lastRun; // the run's first id (msb, lsb) and the next rank
    private java.util.Map<String, long[]> byPair; // only once a second partition appears

    UUID next(String queue, String partition) {
      if (lastRun == null || !queue.equals(lastQueue) || !Objects.equals(partition, lastPartition)) {
        if (lastRun != null && byPair == null) {
          byPair = new java.util.HashMap<>();
          byPair.put(lastQueue + '\u0000' + lastPartition, lastRun);
        }
        long[] run = byPair == null ? null : byPair.get(queue + '\u0000' + partition);
        if (run == null) {
          UUID first = timeOrderedUuid();
          run = new long[] {first.getMostSignificantBits(), first.getLeastSignificantBits(), 0};
          if (byPair != null) {
            byPair.put(queue + '\u0000' + partition, run);
          }
        }
        lastRun = run;
        lastQueue = queue;
        lastPartition = partition;
      }
      return new UUID(lastRun[0], lastRun[1] | lastRun[2]++);
    }
  }

  private Prepared prepare(List<PushItem> items, String defaultQueue, List<String> payloadJson) {
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
    Runs runs = new Runs();
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
        lastOn = encrypted(last, "push");
        if (lastOn && cipher.canSeal()) {
          keys.requireListed(last);
        }
      }
      if (lastOn) {
        if (!cipher.canSeal()) {
          throw new io.queen.EncryptionException(last, noKey(last, "push to") + "; nothing was pushed");
        }
        if (kid == null) {
          kid = new String[n];
        }
        pl[i] = cipher.seal(pl[i], ids[i]);
        kid[i] = cipher.currentId();
      }
    }
    return new Prepared(qs, ps, pl, tx, tr, ids, callerIds, items, ty, ve, kid);
  }

  /**
   * Binds the type names, versions and key ids of a push from {@code first} on: SQL NULL for a batch without
   * typed (or sealed) payloads, so the common push sends nothing more.
   */
  private static void bindTyped(Connection c, PreparedStatement st, int first, Prepared p) throws SQLException {
    if (p.types == null) {
      st.setNull(first, Types.ARRAY);
      st.setNull(first + 1, Types.ARRAY);
    } else {
      st.setArray(first, c.createArrayOf("text", p.types));
      st.setArray(first + 1, c.createArrayOf("int4", p.versions));
    }
    if (p.keyIds == null) {
      st.setNull(first + 2, Types.ARRAY);
    } else {
      st.setArray(first + 2, c.createArrayOf("text", p.keyIds));
    }
  }

  /** A refusal of a plain payload by an encrypted queue: forget the view of it and say so. */
  private void staleEncryption(PSQLException e) {
    if (PLAIN_TO_ENCRYPTED.equals(e.getSQLState())) {
      ServerErrorMessage m = e.getServerErrorMessage();
      String queue = m != null && m.getDetail() != null ? m.getDetail() : "?";
      encryptedQueues.remove(queue);
      throw new StaleEncryptionView(queue);
    }
  }

  /**
   * The de-duplicating push. {@code afterUnknown}: a try of this call may have committed, so the generated ids are
   * looked up too; a caller's transaction id that has the form of a generated id (the items of a
   * {@link PushOutcomeUnknownException}) is looked up in any case. Such an id may have been stored without an
   * index entry, under a receipt: the look-up passes its run's first id and its rank.
   */
  private List<PushResult> push(Connection c, Prepared p, boolean notify, boolean afterUnknown) throws SQLException {
    int n = p.queues.length;
    List<PushResult> out = new ArrayList<>(n);
    UUID[] anchors = null;
    Integer[] ranks = null;
    for (int i = 0; i < n; i++) {
      boolean generated = p.txnIds[i].equals(p.ids[i].toString());
      UUID named = generated ? (afterUnknown ? p.ids[i] : null) : generatedForm(p.txnIds[i]);
      if (named != null) {
        if (anchors == null) {
          anchors = new UUID[n];
          ranks = new Integer[n];
        }
        anchors[i] = anchor(named);
        ranks[i] = rank(named);
      }
    }
    try (PreparedStatement st = c.prepareStatement(pushSql)) {
      st.setArray(1, c.createArrayOf("text", p.queues));
      st.setArray(2, c.createArrayOf("text", p.partitions));
      st.setArray(3, c.createArrayOf("text", p.payloads));
      st.setArray(4, c.createArrayOf("text", p.txnIds));
      st.setArray(5, c.createArrayOf("text", p.traceIds));
      st.setBoolean(6, notify);
      st.setArray(7, c.createArrayOf("uuid", p.ids));
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
          out.add(new PushResult(i, p.queues[i], p.partitions[i],
              "duplicate".equals(rs.getString(2)) ? PushStatus.DUPLICATE : PushStatus.QUEUED,
              rs.getObject(3, UUID.class), rs.getLong(5), p.txnIds[i]));
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

  // -------------------------------------------------------------------------------------------- pop

  /**
   * The parameters of one pop. {@code hints}: the names of the partitions to look at (the consume loop's: those a push or a finished
   * unit named), or null to scan the group's flagged cursors from where this node's previous scan stopped.
   */
  public record PopRequest(String queue, String group, int batch, int partitions, String partition, Duration leaseTime,
      String mode, Instant from, boolean autoAck, String[] hints) {
    public PopRequest(String queue, String group, int batch, int partitions, String partition, Duration leaseTime,
        String mode, Instant from, boolean autoAck) {
      this(queue, group, batch, partitions, partition, leaseTime, mode, from, autoAck, null);
    }
  }

  /** Pops once, without waiting (one statement, its own transaction). */
  public List<Message> pop(PopRequest r) {
    activity.touch(r.queue(), r.group());
    if (!cipher.canSeal() && encrypted(r.queue(), "pop")) {
      throw new io.queen.EncryptionException(r.queue(), noKey(r.queue(), "pop from"));
    }
    // a pop whose every message was undecodable (and dealt with) pops again, a bounded number of times
    for (int round = 0; ; round++) {
      List<Popped> popped = popOnce(r);
      refuseMissingKeys(r, popped);
      List<Message> got = deliverable(popped);
      metrics.delivered(r.queue(), r.group(), got);
      if (!got.isEmpty() || popped.isEmpty() || round == 4) {
        return got;
      }
    }
  }

  private List<Popped> popOnce(PopRequest r) {
    List<Popped> popped = Sql.autoCommit(ds, "pop", c -> {
      try (PreparedStatement st = c.prepareStatement(popSql)) {
        st.setString(1, r.queue());
        st.setString(2, r.group());
        st.setInt(3, r.batch());
        st.setInt(4, r.partitions());
        st.setString(5, r.partition());
        if (r.leaseTime() == null) {
          st.setNull(6, Types.BIGINT);
        } else {
          st.setLong(6, r.leaseTime().toMillis());
        }
        st.setString(7, node);
        st.setString(8, r.mode());
        st.setTimestamp(9, r.from() == null ? null : Timestamp.from(r.from()));
        st.setBoolean(10, r.autoAck());
        // a scan goes on from where this node's previous scan of the group stopped; a pop of named partitions does not
        // move that position
        String position = r.partition() == null && r.hints() == null ? r.queue() + '\u0000' + r.group() : null;
        Long after = position == null ? null : popPositions.get(position);
        if (after == null) {
          st.setNull(11, Types.BIGINT);
        } else {
          st.setLong(11, after);
        }
        if (r.hints() == null) {
          st.setNull(12, Types.ARRAY);
        } else {
          st.setArray(12, c.createArrayOf("text", r.hints()));
        }
        // every pop names the keys this node holds (none: an empty list), so that it leases no partition whose next
        // message it could not open
        st.setArray(13, c.createArrayOf("text", keyIds));
        List<Popped> out = new ArrayList<>();
        long last = -1;
        try (ResultSet rs = st.executeQuery()) {
          reportDeadLetters(st);
          while (rs.next()) {
            if (rs.getObject(4) == null) {
              // no message: the scan passed over partitions that wait for a key this node lacks, up to this one
              last = rs.getLong(2);
              continue;
            }
            String text = rs.getString(7);
            String keyId = rs.getString(13);
            JsonNode payload = null;
            String error = null;
            String missingKey = null;
            try {
              if (keyId != null) {
                if (!cipher.canOpen(keyId)) {
                  missingKey = keyId;
                  throw new PayloadSerializationException(missingKey(r.queue(), keyId), null);
                }
                text = cipher.open(text, keyId, rs.getObject(4, UUID.class));
              }
              payload = codec.parse(text);
            } catch (PayloadSerializationException e) {
              error = e.getMessage();
            } catch (IllegalArgumentException e) {
              error = e.getMessage(); // a sealed payload that fails its check: never the content
            }
            UUID id = rs.getObject(4, UUID.class);
            out.add(new Popped(new Message(r.queue(), rs.getString(1), rs.getLong(2), rs.getLong(3),
                id, transactionId(rs.getString(5), id), rs.getString(6),
                payload != null ? payload : NullNode.getInstance(), rs.getTimestamp(8).toInstant(), r.group(),
                rs.getObject(9, UUID.class), rs.getInt(10), codec.mapper(), rs.getString(11), rs.getInt(12), types),
                error, missingKey));
            last = rs.getLong(2);
          }
        }
        if (position != null && last >= 0) {
          popPositions.put(position, last);
        }
        return out;
      }
    });
    return popped;
  }

  /**
   * A popped row: the message, or why its payload could not be decoded; {@code missingKey} when it is sealed under
   * a key this node does not hold.
   */
  private record Popped(Message message, String error, String missingKey) {}

  /**
   * The pop statement is given the ids of this node's keys and returns no message sealed under another key: it leases
   * no partition whose next message needs one, and cuts a range before such a message, so those wait for a node with
   * the key while the other partitions are served. Should a popped row still name a key this node lacks, every lease
   * of the pop is given back without counting an attempt and the pop refuses with
   * {@link io.queen.EncryptionException} naming the key ids. (Auto-acked rows, whose cursor has already moved, go the
   * way of undecodable ones: a dead-letter row and a WARN, never silently.)
   */
  private void refuseMissingKeys(PopRequest r, List<Popped> popped) {
    String keyId = null;
    for (Popped p : popped) {
      if (p.missingKey() != null && p.message().leaseId() != null) {
        keyId = p.missingKey();
        break;
      }
    }
    if (keyId == null) {
      return;
    }
    java.util.Map<Long, Message> leases = new java.util.LinkedHashMap<>();
    for (Popped p : popped) {
      if (p.message().leaseId() != null) {
        leases.putIfAbsent(p.message().partitionId(), p.message());
      }
    }
    release(new ArrayList<>(leases.values()));
    throw new io.queen.EncryptionException(r.queue(), missingKey(r.queue(), keyId) + "; the popped messages were given"
        + " back untouched");
  }

  /**
   * The messages of a pop that can be delivered, after dealing with those whose payload cannot be
   * decoded (a text beyond the reader's limits, stored by hand or under another mapper). Such a message
   * never holds its partition: at the head of its partition's batch it is dead-lettered at once under
   * the lease just taken (and the rest of the batch delivered); behind delivered messages it cuts the
   * lease short just before it, so acking what was delivered releases the partition and the next pop
   * has it at its head. Auto-acked (the cursor has passed it) it gets a dead-letter row and is skipped.
   */
  private List<Message> deliverable(List<Popped> popped) {
    List<Message> out = new ArrayList<>(popped.size());
    boolean allGood = true;
    for (Popped p : popped) {
      if (p.error() != null) {
        allGood = false;
        break;
      }
      out.add(p.message());
    }
    if (allGood) {
      return out;
    }
    out.clear();
    java.util.Map<Long, List<Popped>> byPartition = new java.util.LinkedHashMap<>();
    for (Popped p : popped) {
      byPartition.computeIfAbsent(p.message().partitionId(), k -> new ArrayList<>()).add(p);
    }
    List<AckRequest> deadLetters = new ArrayList<>();
    List<Message> cuts = new ArrayList<>();
    List<Popped> autoAcked = new ArrayList<>();
    for (List<Popped> rows : byPartition.values()) {
      rows.sort(java.util.Comparator.comparingLong(p -> p.message().offset()));
      boolean delivered = false;
      for (Popped p : rows) {
        Message m = p.message();
        if (p.error() == null) {
          out.add(m);
          delivered = true;
        } else if (m.leaseId() == null) {
          autoAcked.add(p);
        } else if (!delivered) {
          deadLetters.add(new AckRequest(m, AckStatus.DEAD_LETTER, "payload cannot be decoded: " + p.error()));
        } else {
          cuts.add(m);
          break; // nothing after it is delivered before it is dealt with
        }
      }
    }
    for (AckRequest a : deadLetters) {
      Message m = a.message();
      LOG.warn("{} - message {} ({}/{} offset {}, group '{}') cannot be decoded and goes to the dead-letter queue: {}",
          node, m.id(), m.queue(), m.partition(), m.offset(), m.consumerGroup(), a.error());
    }
    if (!deadLetters.isEmpty()) {
      ack(deadLetters);
    }
    if (!cuts.isEmpty() || !autoAcked.isEmpty()) {
      Sql.autoCommit(ds, "pop", c -> {
        for (Message m : cuts) {
          try (PreparedStatement st = c.prepareStatement(shrinkSql)) {
            st.setLong(1, m.partitionId());
            st.setString(2, m.consumerGroup());
            st.setObject(3, m.leaseId());
            st.setLong(4, m.offset() - 1);
            st.executeQuery().close();
          }
        }
        for (Popped p : autoAcked) {
          Message m = p.message();
          LOG.warn("{} - message {} ({}/{} offset {}, group '{}', auto-ack) cannot be decoded and is not delivered: {}",
              node, m.id(), m.queue(), m.partition(), m.offset(), m.consumerGroup(), p.error());
          try (PreparedStatement st = c.prepareStatement(deadLetterAutoAckedSql)) {
            st.setString(1, m.consumerGroup());
            st.setString(2, "payload cannot be decoded: " + p.error());
            st.setLong(3, m.partitionId());
            st.setLong(4, m.offset());
            st.executeUpdate();
          }
        }
        return null;
      });
    }
    return out;
  }

  /**
   * Logs the dead-letter moves the database reported while running {@code st} (notices raised by the
   * {@code dead_letter} function): one WARN each, with queue, group, partition, offset, attempts and the
   * last error, never the payload.
   */
  public void reportDeadLetters(java.sql.Statement st) {
    try {
      for (java.sql.SQLWarning w = st.getWarnings(); w != null; w = w.getNextWarning()) {
        if (!(w instanceof org.postgresql.util.PSQLWarning pw) || pw.getServerErrorMessage() == null
            || !"queen:dead_letter".equals(pw.getServerErrorMessage().getMessage())) {
          continue;
        }
        JsonNode d = codec.mapper().readTree(pw.getServerErrorMessage().getDetail());
        String group = d.path("group").asText();
        LOG.warn("{} - {} {} partition '{}' offset {} after {} attempt(s); last error: {}", node,
            d.path("kept").asBoolean() ? "dead-lettered" : "dropped (deadLetter=false)",
            where(d.path("queue").asText(), group), d.path("partition").asText(),
            d.path("offset").asLong(), d.path("attempts").asInt(), d.path("error").asText("(none)"));
        metrics.deadLettered(d.path("queue").asText(), group, d.path("kept").asBoolean());
      }
      st.clearWarnings();
    } catch (SQLException | java.io.IOException | RuntimeException e) {
      LOG.debug("{} - could not read the database's dead-letter notices: {}", node, e.toString());
    }
  }

  // -------------------------------------------------------------------------------------------- ack

  /** One acknowledgement. */
  public record AckRequest(Message message, AckStatus status, String error) {
    /**
     * The error text is stored as it comes, shortened to 8,192 characters and with any NUL character (which
     * PostgreSQL's text refuses, and which would fail the whole acknowledgement call) replaced by U+FFFD.
     */
    public AckRequest {
      Objects.requireNonNull(message, "message must not be null");
      Objects.requireNonNull(status, "status must not be null");
      if (error != null && error.length() > 8192) {
        error = error.substring(0, 8192);
      }
      if (error != null && error.indexOf('\0') >= 0) {
        error = error.replace('\0', '\uFFFD');
      }
    }
  }

  /**
   * Acknowledges in a transaction Queen owns. Retried on a fresh connection when the connection is lost:
   * an ack is idempotent (a message the first try already acknowledged reports ALREADY_ACKED and changes
   * nothing, whatever became of its lease).
   */
  public List<AckResult> ack(List<AckRequest> acks) {
    return ack(acks, false);
  }

  /**
   * {@link #ack(List)}; {@code keepBusy}: the consume loop's acks, which leave the {@code has_pending} flag of a partition
   * pushed to in the last 100 ms set (the loop pops the partitions pushes name, so the flag costs it nothing, and the
   * next push into the partition writes nothing to its cursors). A consumer's own acks clear it: its pops scan.
   */
  public List<AckResult> ack(List<AckRequest> acks, boolean keepBusy) {
    List<AckResult> res = Sql.idempotent(ds, "ack", true, c -> ack(c, acks, keepBusy));
    if (metrics.enabled()) {
      for (int i = 0; i < res.size(); i++) {
        Message m = acks.get(i).message();
        metrics.acked(m.queue(), m.consumerGroup(), List.of(res.get(i)));
      }
    }
    return res;
  }

  public Metrics metrics() {
    return metrics;
  }

  /** The groups this node used since the janitor last wrote their activity. */
  public GroupActivity activity() {
    return activity;
  }

  /**
   * Acknowledges on the caller's connection, inside the caller's transaction. Messages delivered with
   * auto-ack (no lease) are reported ACKED without touching the database.
   */
  public List<AckResult> ack(Connection c, List<AckRequest> acks) throws SQLException {
    return ack(c, acks, false);
  }

  private List<AckResult> ack(Connection c, List<AckRequest> acks, boolean keepBusy) throws SQLException {
    int n = acks.size();
    AckResult[] out = new AckResult[n];
    List<Integer> sent = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      Message m = acks.get(i).message();
      activity.touch(m.queue(), m.consumerGroup());
      if (m.leaseId() == null) {
        out[i] = new AckResult(m.partitionId(), m.offset(), AckOutcome.ACKED);
      } else {
        sent.add(i);
      }
    }
    if (!sent.isEmpty()) {
      List<AckRequest> leased = new ArrayList<>(sent.size());
      for (int i : sent) {
        leased.add(acks.get(i));
      }
      try (PreparedStatement st = c.prepareStatement(keepBusy ? ackKeepingBusySql : ackSql)) {
        bindAcks(c, st, 1, leased);
        try (ResultSet rs = st.executeQuery()) {
          reportDeadLetters(st);
          while (rs.next()) {
            int j = rs.getInt(1) - 1;
            Message m = acks.get(sent.get(j)).message();
            out[sent.get(j)] = new AckResult(m.partitionId(), m.offset(), AckOutcome.valueOf(rs.getString(2)));
          }
        }
      }
    }
    return List.of(out);
  }

  /**
   * Binds acknowledgements (all under leases) as six array parameters from {@code first} on: partition
   * ids, groups, offsets, lease ids, statuses, errors (the argument order of the {@code ack} function).
   */
  public static void bindAcks(Connection c, PreparedStatement st, int first, List<AckRequest> acks) throws SQLException {
    int k = acks.size();
    Long[] pids = new Long[k];
    String[] groups = new String[k];
    Long[] offsets = new Long[k];
    String[] leases = new String[k];
    String[] statuses = new String[k];
    String[] errors = new String[k];
    for (int j = 0; j < k; j++) {
      AckRequest a = acks.get(j);
      pids[j] = a.message().partitionId();
      groups[j] = a.message().consumerGroup();
      offsets[j] = a.message().offset();
      leases[j] = a.message().leaseId().toString();
      statuses[j] = a.status().name();
      errors[j] = a.error();
    }
    st.setArray(first, c.createArrayOf("bigint", pids));
    st.setArray(first + 1, c.createArrayOf("text", groups));
    st.setArray(first + 2, c.createArrayOf("bigint", offsets));
    st.setArray(first + 3, c.createArrayOf("text", leases));
    st.setArray(first + 4, c.createArrayOf("text", statuses));
    st.setArray(first + 5, c.createArrayOf("text", errors));
  }

  // ---------------------------------------------------------------------------------- renew, release

  /** Renews leases; returns how many were still held and got extended. */
  public int renew(List<Message> leased) {
    if (leased.isEmpty()) {
      return 0;
    }
    return Sql.idempotent(ds, "renew", true, c -> leaseCall(c, renewSql, leased, true));
  }

  /** Gives leases back without counting an attempt. */
  public int release(List<Message> leased) {
    if (leased.isEmpty()) {
      return 0;
    }
    return Sql.idempotent(ds, "release", true, c -> leaseCall(c, releaseSql, leased, false));
  }

  private static int leaseCall(Connection c, String sql, List<Message> leased, boolean countRows) throws SQLException {
    int n = leased.size();
    Long[] pids = new Long[n];
    String[] groups = new String[n];
    String[] leases = new String[n];
    for (int i = 0; i < n; i++) {
      Message m = leased.get(i);
      pids[i] = m.partitionId();
      groups[i] = m.consumerGroup();
      leases[i] = m.leaseId().toString();
    }
    try (PreparedStatement st = c.prepareStatement(sql)) {
      Array a1 = c.createArrayOf("bigint", pids);
      st.setArray(1, a1);
      st.setArray(2, c.createArrayOf("text", groups));
      st.setArray(3, c.createArrayOf("text", leases));
      try (ResultSet rs = st.executeQuery()) {
        int count = 0;
        while (rs.next()) {
          count += countRows ? 1 : rs.getInt(1);
        }
        return count;
      }
    }
  }

  /**
   * Gives back every lease this node holds (any queue, any group) without counting an attempt, in one
   * statement bounded by {@code timeoutMillis}; returns how many. For {@code Queen.close()}: leases taken
   * by a manual {@code pop()} are released too, so other nodes need not wait for them to expire. Only
   * while this start ({@code incarnation}) still holds the node's row: when another process took the id
   * over (this one was paused past its session timeout), the leases under this id are that process's.
   */
  public int releaseOwned(long timeoutMillis, java.util.UUID incarnation) {
    return Sql.autoCommit(ds, "release on close", c -> {
      // the rows are locked in key order first, as every statement that locks several cursor rows does, so two such statements cannot deadlock
      try (PreparedStatement st = c.prepareStatement("with mine as (select partition_id, group_name from " + schema
          + ".cursors where lease_owner = ? and lease_id is not null"
          + " and exists (select 1 from " + schema + ".nodes n where n.node_id = ? and n.incarnation = ?)"
          + " order by partition_id, group_name for update)"
          + " update " + schema + ".cursors cu set lease_id = null, lease_owner = null, lease_expires_at = null,"
          + " lease_from = null, lease_to = null, lease_redrive = null, acked_ahead = null"
          + " from mine m where cu.partition_id = m.partition_id and cu.group_name = m.group_name")) {
        st.setQueryTimeout((int) Math.max(1, (timeoutMillis + 999) / 1000));
        st.setString(1, node);
        st.setString(2, node);
        st.setObject(3, incarnation);
        return st.executeUpdate();
      }
    });
  }

  /**
   * Sets whether an expired lease counts as an attempt for the group, creating the group the way its
   * first pop would; false when the queue does not exist yet (nothing is created then).
   */
  public boolean groupExpiry(PopRequest r, boolean counts) {
    return Sql.autoCommit(ds, "group expiry", c -> {
      try (PreparedStatement st = c.prepareStatement("select " + schema + ".group_expiry(?, ?, ?, ?, ?)")) {
        st.setString(1, r.queue());
        st.setString(2, r.group());
        st.setString(3, r.mode());
        st.setTimestamp(4, r.from() == null ? null : Timestamp.from(r.from()));
        st.setBoolean(5, counts);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          return rs.getBoolean(1);
        }
      }
    });
  }

  /** Whether the queue exists (created by a push or by configure). */
  public boolean queueExists(String queue) {
    return Sql.autoCommit(ds, "queue exists", c -> {
      try (PreparedStatement st = c.prepareStatement("select 1 from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next();
        }
      }
    });
  }

  // ------------------------------------------------------------------------------------ queue admin

  /** The queue's configuration, or the defaults when it does not exist. */
  public QueueConfig config(String queue) {
    return Sql.autoCommit(ds, "config", c -> {
      try (PreparedStatement st = c.prepareStatement("select lease_time_ms, retry_limit, retry_delay_ms, dead_letter,"
          + " delayed_processing_ms, window_buffer_ms, max_size, retention_ms, completed_retention_ms,"
          + " allow_drop_past_committed, pending_alert_after_ms, encryption from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        try (ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            return QueueConfig.DEFAULTS;
          }
          return readConfig(rs, 1, 12);
        }
      }
    });
  }

  /** A queue's configuration from the columns at {@code col} (in the order of {@link #config}) and {@code encCol}. */
  public static QueueConfig readConfig(ResultSet rs, int col, int encCol) throws SQLException {
    return new QueueConfig(Duration.ofMillis(rs.getLong(col)), rs.getInt(col + 1), Duration.ofMillis(rs.getLong(col + 2)),
        rs.getBoolean(col + 3), Duration.ofMillis(rs.getLong(col + 4)), Duration.ofMillis(rs.getLong(col + 5)),
        rs.getLong(col + 6), Duration.ofMillis(rs.getLong(col + 7)), Duration.ofMillis(rs.getLong(col + 8)),
        rs.getBoolean(col + 9), Duration.ofMillis(rs.getLong(col + 10)), rs.getBoolean(encCol));
  }

  /** Creates the queue if needed and stores the configuration. */
  public void configure(String queue, QueueConfig cfg) {
    Sql.inTransaction(ds, "configure", c -> {
      try (PreparedStatement st = c.prepareStatement("insert into " + schema + ".queues as q (name, lease_time_ms,"
          + " retry_limit, retry_delay_ms, dead_letter, delayed_processing_ms, window_buffer_ms, max_size, retention_ms,"
          + " completed_retention_ms, allow_drop_past_committed, pending_alert_after_ms, encryption)"
          + " values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (name) do update set lease_time_ms = excluded.lease_time_ms,"
          + " retry_limit = excluded.retry_limit, retry_delay_ms = excluded.retry_delay_ms,"
          + " dead_letter = excluded.dead_letter, delayed_processing_ms = excluded.delayed_processing_ms,"
          + " window_buffer_ms = excluded.window_buffer_ms, max_size = excluded.max_size,"
          + " retention_ms = excluded.retention_ms, completed_retention_ms = excluded.completed_retention_ms,"
          + " allow_drop_past_committed = excluded.allow_drop_past_committed,"
          + " pending_alert_after_ms = excluded.pending_alert_after_ms, encryption = excluded.encryption")) {
        st.setString(1, queue);
        st.setLong(2, cfg.leaseTime().toMillis());
        st.setInt(3, cfg.retryLimit());
        st.setLong(4, cfg.retryDelay().toMillis());
        st.setBoolean(5, cfg.deadLetter());
        st.setLong(6, cfg.delayedProcessing().toMillis());
        st.setLong(7, cfg.windowBuffer().toMillis());
        st.setLong(8, cfg.maxSize());
        st.setLong(9, cfg.retention().toMillis());
        st.setLong(10, cfg.completedRetention().toMillis());
        st.setBoolean(11, cfg.allowDropPastCommitted());
        st.setLong(12, cfg.pendingAlertAfter().toMillis());
        st.setBoolean(13, cfg.encryption());
        st.executeUpdate();
      }
      return null;
    });
    encryptedQueues.remove(queue);
  }

  /**
   * Deletes a queue and everything in it. The queue row and then its partition rows (in id order) are locked first,
   * as a push and the retention janitor take them, before any message row: without that, a retention step holding a
   * partition while it deleted that partition's prefix and this delete holding the messages deadlocked (40P01), and
   * under a janitor that keeps level with ingest every retry met the next step.
   */
  public void deleteQueue(String queue) {
    Sql.inTransaction(ds, "delete queue", c -> {
      Sql.noJit(c); // the delete's estimate grows with the queue: a server with JIT would compile it
      try (PreparedStatement st = c.prepareStatement("select p.id from " + schema + ".partitions p where p.queue_id ="
          + " (select q.id from " + schema + ".queues q where q.name = ? for update) order by p.id for update")) {
        st.setString(1, queue);
        st.executeQuery().close();
      }
      try (PreparedStatement st = c.prepareStatement("delete from " + schema + ".messages where partition_id in"
          + " (select p.id from " + schema + ".partitions p join " + schema + ".queues q on q.id = p.queue_id"
          + " where q.name = ?)")) {
        st.setString(1, queue);
        st.executeUpdate();
      }
      try (PreparedStatement st = c.prepareStatement("delete from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        st.executeUpdate();
      }
      return null;
    });
    forgetQueue(queue);
  }

  /** How many queue and group names this node holds in memory, by map (for tests and diagnostics). */
  public Map<String, Integer> namesHeld() {
    return Map.of("encryptionViews", encryptedQueues.size(), "popPositions", popPositions.size(),
        "signals", wakeups.signalsHeld(), "listenerSets", wakeups.listenerSetsHeld());
  }

  /**
   * The queue names this node keeps something of in memory: options views, pop positions, wake-up signals, meters.
   * The group watch compares them with the queues that exist, to forget the ones another node deleted.
   */
  public Set<String> queuesHeld() {
    Set<String> out = new java.util.HashSet<>(encryptedQueues.keySet());
    for (String k : popPositions.keySet()) {
      out.add(k.substring(0, k.indexOf('\u0000')));
    }
    out.addAll(wakeups.signalQueues());
    out.addAll(metrics.queuesMetered());
    return out;
  }

  /** Forgets a queue another node deleted (the group watch saw it missing twice), as {@link #deleteQueue} does here. */
  public void forgetDeletedElsewhere(String queue) {
    forgetQueue(queue);
  }

  /** Forgets a group that is gone (deleted here or elsewhere): its pop positions and its meters. */
  public void forgetGroup(String queue, String group) {
    popPositions.remove(queue + '\u0000' + group);
    metrics.groupDeleted(queue, group);
  }

  /**
   * What this node keeps in memory of a queue it deleted: its options, its pop positions, its wake-up signal, its
   * meters. Without this every queue ever created and deleted under a new name (per-tenant or temporary queues) stayed
   * in those maps and some twenty meters for the node's life (a soak: about 790 meters per 100 queues and groups).
   */
  private void forgetQueue(String queue) {
    encryptedQueues.remove(queue);
    popPositions.keySet().removeIf(k -> k.startsWith(queue + '\u0000'));
    wakeups.forget(queue);
    metrics.queueDeleted(queue);
  }

  /** Moves a group's cursors: mode BEGINNING, END or TIME. */
  public int seek(String queue, String group, String mode, Instant at) {
    activity.touch(queue, group);
    return Sql.inTransaction(ds, "seek", c -> {
      requireGroup(c, queue, group);
      try (PreparedStatement st = c.prepareStatement("select " + schema + ".seek(?, ?, ?, ?)")) {
        st.setString(1, queue);
        st.setString(2, group);
        st.setString(3, mode);
        st.setTimestamp(4, at == null ? null : Timestamp.from(at));
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          return rs.getInt(1);
        }
      }
    });
  }

  /**
   * Refuses a seek of a queue or group that does not exist: the seek would otherwise subscribe a misspelt group,
   * which then holds back retention for its queue until someone deletes it. Names up to ten of the queue's groups.
   */
  private void requireGroup(Connection c, String queue, String group) throws SQLException {
    requireGroup(c, queue, group, "seek", "nothing was moved", "; seek moves the cursors of a group that exists. A new"
        + " group starts where subscription(...) or subscriptionFrom(...) says when it first consumes. Nothing was"
        + " created or moved");
  }

  /**
   * Refuses an action on the dead letters of a queue or group that does not exist, so that a misspelt name is not
   * read as an empty dead-letter queue. The default group needs only its queue.
   */
  public void requireGroup(String queue, String group, String action) {
    Sql.autoCommit(ds, action, c -> {
      requireGroup(c, queue, group, action, "nothing was done", "; nothing was done");
      return null;
    });
  }

  private void requireGroup(Connection c, String queue, String group, String action, String noQueue, String tail)
      throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select q.id, exists (select 1 from " + schema
        + ".consumer_groups g where g.queue_id = q.id and g.name = ?), array(select g.name from " + schema
        + ".consumer_groups g where g.queue_id = q.id order by g.name limit 10) from " + schema
        + ".queues q where q.name = ? for key share of q")) {
      st.setString(1, group);
      st.setString(2, queue);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          throw new IllegalArgumentException(action + ": queue '" + queue + "' does not exist; " + noQueue);
        }
        boolean needsNoRow = !"seek".equals(action) && Queen.DEFAULT_GROUP.equals(group);
        if (!rs.getBoolean(2) && !needsNoRow) {
          String[] known = (String[]) rs.getArray(3).getArray();
          throw new IllegalArgumentException(action + ": group '" + group + "' has never consumed queue '" + queue
              + "' (its groups: " + (known.length == 0 ? "none" : String.join(", ", known)) + ")" + tail);
        }
      }
    }
  }

  /** Forgets a consumer group of a queue. */
  public void deleteGroup(String queue, String group) {
    deleteGroup(queue, group, -1);
  }

  /**
   * Removes a consumer group that has been idle longer than {@code idleMillis} (its {@code last_active_at}, read again
   * under the queue's lock); returns whether it did.
   */
  public boolean expireGroup(String queue, String group, long idleMillis) {
    return deleteGroup(queue, group, idleMillis);
  }

  /** Deletes the group; with {@code idleMillis >= 0}, only when it is still that idle. */
  private boolean deleteGroup(String queue, String group, long idleMillis) {
    boolean deleted = Sql.inTransaction(ds, "delete group", c -> {
      // the queue row first, FOR UPDATE, as ensure_group takes it: a push that creates a partition holds KEY SHARE on
      // it (the foreign key) until it commits, and inserts the new partition's cursors, one per group it sees, in a
      // later statement. Without the lock such a push could add a cursor of this group after the delete below had
      // passed, and the orphan (at offset -1) held the partition's messages from retention for good.
      try (PreparedStatement st = c.prepareStatement("select 1 from " + schema + ".queues where name = ? for update")) {
        st.setString(1, queue);
        st.executeQuery().close();
      }
      if (idleMillis >= 0) {
        try (PreparedStatement st = c.prepareStatement("select 1 from " + schema + ".consumer_groups g join " + schema
            + ".queues q on q.id = g.queue_id where q.name = ? and g.name = ?"
            + " and g.last_active_at < now() - ? * interval '1 millisecond'")) {
          st.setString(1, queue);
          st.setString(2, group);
          st.setLong(3, idleMillis);
          try (ResultSet rs = st.executeQuery()) {
            if (!rs.next()) {
              return false; // used meanwhile
            }
          }
        }
      }
      String q = "(select id from " + schema + ".queues where name = ?)";
      for (String sql : List.of(
          "delete from " + schema + ".redeliveries r using " + schema + ".partitions p where p.id = r.partition_id"
              + " and p.queue_id = " + q + " and r.group_name = ?",
          "delete from " + schema + ".cursors where queue_id = " + q + " and group_name = ?",
          "delete from " + schema + ".dead_letters where queue_id = " + q + " and group_name = ?",
          "delete from " + schema + ".consumer_groups where queue_id = " + q + " and name = ?")) {
        try (PreparedStatement st = c.prepareStatement(sql)) {
          st.setString(1, queue);
          st.setString(2, group);
          st.executeUpdate();
        }
      }
      return true;
    });
    if (deleted) {
      forgetGroup(queue, group);
    }
    return deleted;
  }

  /** How a person reads a queue and group in a log line: the default group is named as such. */
  public static String where(String queue, String group) {
    return Queen.DEFAULT_GROUP.equals(group) ? "queue '" + queue + "' (default group)"
        : "queue '" + queue + "' group '" + group + "'";
  }
}
