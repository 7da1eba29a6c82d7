package io.queen.embedded.internal.tx;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.CommitResult;
import io.queen.KvEntry;
import io.queen.KvOptions;
import io.queen.KvWriteResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Transaction;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.kv.KvStore;
import io.queen.embedded.internal.kv.KvWrite;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.HandlerAcks;
import io.queen.embedded.internal.log.Metrics;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;

/**
 * A bundle of pushes, acks and KV operations applied as one PostgreSQL transaction.
 *
 * <p>Building only records and checks: names, values (serialised now, so a value over 64 KiB fails
 * here), and the rule that a bundle touches a given key at most once. Nothing is sent before
 * {@link #commit()} or {@link #commit(Connection)}. The operations then run in the order they were
 * added, one statement per KV operation and one per run of consecutive pushes or acks. The first
 * required KV write that does not apply, or the first ack whose lease was lost, stops the bundle and
 * undoes everything it did; that is a {@link CommitResult} with {@code success=false}, never an
 * exception.
 *
 * <p>Not thread-safe; commit once.
 */
public final class TransactionImpl implements Transaction {
  private final Broker broker;
  private final KvStore store;
  private final Consumer<Map<String, Set<String>>> afterCommit;
  private final Runnable guard;
  private final List<Op> ops = new ArrayList<>();
  private final Set<String> touched = new HashSet<>();
  /** Whether {@link #connection()} may be taken: the transaction a consume loop hands a transactional handler. */
  private final boolean forHandler;
  /** The handler's connection, once taken: the bundle commits on it. Volatile: {@link #abort} reads it from another thread. */
  private volatile Connection own;
  /** Run once by {@link #close()}. */
  private Runnable onClose;
  /** Its isolation level before it was set to READ COMMITTED, restored when it goes back to the pool. */
  private int ownIsolation;
  private boolean done;

  /**
   * @param broker runs pushes and acks on a given connection; its DataSource is used by {@link #commit()}
   * @param store runs the KV operations
   * @param afterCommit called with the partitions that got a message, queue by queue, after a successful commit Queen
   *     owns (wakes this node's waiters and notifies the other nodes, naming them as a push does)
   */
  public TransactionImpl(Broker broker, KvStore store, Consumer<Map<String, Set<String>>> afterCommit) {
    this(broker, store, afterCommit, () -> { });
  }

  /**
   * @param guard runs before a commit touches the database; throws when the node is closed
   *     ({@link io.queen.BrokerClosedException})
   */
  public TransactionImpl(Broker broker, KvStore store, Consumer<Map<String, Set<String>>> afterCommit,
      Runnable guard) {
    this(broker, store, afterCommit, guard, false);
  }

  /**
   * @param forHandler whether this is the transaction of a transactional handler, whose {@link #connection()} may be
   *     taken; its owner calls {@link #close()} once the handler's message is settled
   */
  public TransactionImpl(Broker broker, KvStore store, Consumer<Map<String, Set<String>>> afterCommit,
      Runnable guard, boolean forHandler) {
    this.forHandler = forHandler;
    this.broker = Objects.requireNonNull(broker, "broker must not be null");
    this.store = Objects.requireNonNull(store, "store must not be null");
    this.afterCommit = Objects.requireNonNull(afterCommit, "afterCommit must not be null");
    this.guard = Objects.requireNonNull(guard, "guard must not be null");
  }

  // --------------------------------------------------------------------------------------- building

  private sealed interface Op permits PushOp, AckOp, WriteOp, GetOp, GetManyOp {}

  /** A push, its payload already checked and encoded when it was added. */
  private record PushOp(PushItem item, String payloadJson) implements Op {}

  private record AckOp(List<Broker.AckRequest> acks) implements Op {}

  private record WriteOp(KvWrite write) implements Op {}

  private record GetOp(String namespace, String key) implements Op {}

  private record GetManyOp(String namespace, List<String> keys) implements Op {}

  private Transaction add(Op op) {
    ops.add(op);
    return this;
  }

  private void open() {
    if (done) {
      throw new IllegalStateException("this transaction was already committed; start a new one with queen.transaction()");
    }
  }

  /** Records a touch of (namespace, key); a second touch is a mistake the caller must fix. */
  private void touch(String namespace, String key) {
    if (!touched.add(namespace + '\0' + key)) {
      throw new IllegalArgumentException("this transaction already touches key '" + key + "' of namespace '" + namespace
          + "': a bundle may touch a key at most once, so there is no evaluation order inside it to reason about");
    }
  }

  @Override
  public Transaction push(String queue, String partition, Object payload) {
    open();
    Objects.requireNonNull(queue, "queue must not be null");
    PushItem item = PushItem.to(queue, partition, payload);
    return add(new PushOp(item, broker.pushes().payloadJson(item.payload(), "operations[" + ops.size() + "].payload")));
  }

  @Override
  public Transaction push(PushItem item) {
    open();
    Objects.requireNonNull(item, "item must not be null");
    if (item.queue() == null) {
      throw new IllegalArgumentException("a pushed item in a transaction must name its queue: use PushItem.to(queue, partition, payload)");
    }
    return add(new PushOp(item, broker.pushes().payloadJson(item.payload(), "operations[" + ops.size() + "].payload")));
  }

  @Override
  public Transaction ack(Message message) {
    return ack(message, AckStatus.COMPLETED, null);
  }

  @Override
  public Transaction ack(Message message, AckStatus status, String error) {
    open();
    Objects.requireNonNull(message, "message must not be null");
    Objects.requireNonNull(status, "status must not be null");
    return add(new AckOp(List.of(new Broker.AckRequest(message, status, error))));
  }

  @Override
  public Transaction ack(List<Message> messages) {
    open();
    Objects.requireNonNull(messages, "messages must not be null");
    List<Broker.AckRequest> acks = new ArrayList<>(messages.size());
    for (int i = 0; i < messages.size(); i++) {
      acks.add(new Broker.AckRequest(Objects.requireNonNull(messages.get(i), "messages[" + i + "]"),
          AckStatus.COMPLETED, null));
    }
    return add(new AckOp(List.copyOf(acks)));
  }

  @Override
  public Transaction put(String namespace, String key, Object value, KvOptions options) {
    open();
    KvWrite w = store.preparePut(namespace, key, value, options);
    touch(namespace, key);
    return add(new WriteOp(w));
  }

  @Override
  public Transaction putIfAbsent(String namespace, String key, Object value, KvOptions options) {
    open();
    KvWrite w = store.preparePutIfAbsent(namespace, key, value, options);
    touch(namespace, key);
    return add(new WriteOp(w));
  }

  @Override
  public Transaction once(String namespace, String key, KvOptions options) {
    return putIfAbsent(namespace, key, Boolean.TRUE, options);
  }

  @Override
  public Transaction incr(String namespace, String key, long delta, KvOptions options) {
    open();
    KvWrite w = store.prepareIncr(namespace, key, delta, options);
    touch(namespace, key);
    return add(new WriteOp(w));
  }

  @Override
  public Transaction delete(String namespace, String key) {
    open();
    KvWrite w = store.prepareDelete(namespace, key, null, false);
    touch(namespace, key);
    return add(new WriteOp(w));
  }

  @Override
  public Transaction delete(String namespace, String key, long expectVersion, boolean required) {
    open();
    KvWrite w = store.prepareDelete(namespace, key, expectVersion, required);
    touch(namespace, key);
    return add(new WriteOp(w));
  }

  @Override
  public Transaction get(String namespace, String key) {
    open();
    KvStore.checkKey(namespace, key);
    touch(namespace, key);
    return add(new GetOp(namespace, key));
  }

  @Override
  public Transaction getMany(String namespace, Collection<String> keys) {
    open();
    List<String> ks = KvStore.checkKeys(namespace, keys);
    Set<String> mine = new HashSet<>();
    for (String k : ks) {
      if (!mine.add(k) || touched.contains(namespace + '\0' + k)) {
        touch(namespace, k); // both touches are known now: fails before anything is recorded
        mine.add(k);
      }
    }
    for (String k : ks) {
      touch(namespace, k);
    }
    return add(new GetManyOp(namespace, List.copyOf(ks)));
  }

  // ---------------------------------------------------------------------------------------- the handler's connection

  @Override
  public Connection connection() {
    open();
    if (!forHandler) {
      throw new IllegalStateException("connection() belongs to the transaction the consume loop hands a transactional"
          + " handler; with queen.transaction(), run your SQL on your own connection and join the bundle to its"
          + " transaction with commit(connection)");
    }
    if (own == null) {
      guard.run();
      Connection c;
      try {
        c = broker.dataSource().getConnection();
      } catch (SQLException e) {
        throw Sql.translate("transaction", e);
      }
      try {
        ownIsolation = c.getTransactionIsolation();
        c.setAutoCommit(false);
        if (ownIsolation != Connection.TRANSACTION_READ_COMMITTED) {
          c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED); // as commit(Connection) requires
        }
      } catch (SQLException e) {
        closeQuietly(c, e);
        throw Sql.translate("transaction", e);
      }
      own = HandlerConnection.guard(c);
    }
    return own;
  }

  /**
   * Gives the handler's connection back to the pool, rolling back what was not committed; nothing when none was taken.
   * The consume loop calls it after each handler's message, whatever happened; a second call does nothing.
   */
  public void close() {
    done = true;
    Runnable after = onClose;
    onClose = null;
    if (after != null) {
      after.run();
    }
    Connection c = own;
    own = null;
    if (c == null) {
      return;
    }
    Connection raw = HandlerConnection.unwrap(c);
    try {
      raw.rollback(); // nothing when the bundle committed
      if (ownIsolation != Connection.TRANSACTION_READ_COMMITTED) {
        raw.setTransactionIsolation(ownIsolation);
      }
      raw.setAutoCommit(true);
    } catch (SQLException e) {
      // a broken connection: the pool finds out when it is closed
    } finally {
      closeQuietly(raw, null);
    }
  }

  /** Runs {@code r} when this transaction is closed. */
  public void onClose(Runnable r) {
    this.onClose = r;
  }

  /**
   * Ends the handler's connection from another thread, for a close whose grace period ran out while the handler
   * still runs: the connection is aborted, so a statement it runs fails, and neither the handler's statements nor
   * the bundle can commit any more. Nothing when no connection was taken.
   */
  public void abort() {
    Connection c = own;
    if (c == null) {
      return;
    }
    try {
      HandlerConnection.unwrap(c).abort(Runnable::run);
    } catch (SQLException | RuntimeException e) {
      // already closed or broken: it cannot commit either way
    }
  }

  private static void closeQuietly(Connection c, Throwable cause) {
    try {
      c.close();
    } catch (SQLException e) {
      if (cause != null) {
        cause.addSuppressed(e);
      }
    }
  }

  /** Commits the bundle on the handler's connection, with the handler's own statements, or rolls all of it back. */
  private CommitResult commitOnHandlersConnection() {
    done = true;
    Connection raw = HandlerConnection.unwrap(own);
    Run run;
    try {
      run = ops.isEmpty() ? new Run() : apply(raw, true);
      if (run.failure != null) {
        raw.rollback();
        return run.failure;
      }
      raw.commit();
    } catch (SQLException e) {
      try {
        raw.rollback();
      } catch (SQLException suppressed) {
        e.addSuppressed(suppressed);
      }
      throw Sql.translate("transaction", e);
    }
    if (!run.partitions.isEmpty()) {
      broker.pushes().wakeLocal(run.partitions.keySet()); // the other nodes had the NOTIFY with the commit
    }
    broker.metrics().pushed(run.pushes);
    reportAcks(run.acks);
    HandlerAcks.committed(ackedMessages());
    return success(run);
  }

  /** The messages this bundle acknowledges. */
  private List<Message> ackedMessages() {
    List<Message> out = new ArrayList<>();
    for (Op op : ops) {
      if (op instanceof AckOp a) {
        a.acks().forEach(r -> out.add(r.message()));
      }
    }
    return out;
  }

  // ---------------------------------------------------------------------------------------- commit

  @Override
  public CommitResult commit() {
    guard.run();
    open();
    if (own != null) {
      return commitOnHandlersConnection();
    }
    done = true;
    if (ops.isEmpty()) {
      return success(new Run());
    }
    Run run = kvThenAcks() ? Sql.autoCommit(broker.dataSource(), "transaction", this::applyKvThenAcks)
        : Sql.inTransaction(broker.dataSource(), "transaction", c -> {
      Run r = apply(c, false);
      if (r.failure != null) {
        c.rollback();
      }
      return r;
    });
    if (run.failure == null && !run.partitions.isEmpty()) {
      afterCommit.accept(run.partitions);
    }
    if (run.failure == null) {
      broker.metrics().pushed(run.pushes); // queen.messages.pushed counts what a transaction stored too
      reportAcks(run.acks);
      HandlerAcks.committed(ackedMessages());
    }
    return run.failure != null ? run.failure : success(run);
  }

  /** Reports a committed bundle's acks to the metrics, as {@code queen.ack} does: results are in the order of the acks. */
  private void reportAcks(List<AckResult> results) {
    Metrics metrics = broker.metrics();
    if (!metrics.enabled()) {
      return;
    }
    int i = 0;
    for (Op op : ops) {
      if (op instanceof AckOp a) {
        for (Broker.AckRequest r : a.acks()) {
          metrics.acked(r.message().queue(), r.message().consumerGroup(), List.of(results.get(i++)));
        }
      }
    }
  }

  @Override
  public CommitResult commit(Connection connection) {
    guard.run();
    open();
    Objects.requireNonNull(connection, "connection must not be null");
    try {
      if (connection.getAutoCommit()) {
        throw new IllegalStateException("commit(Connection) joins the caller's transaction, but the connection has"
            + " auto-commit on, so there is no transaction to join: call connection.setAutoCommit(false) first, or"
            + " use commit() to let Queen own the transaction");
      }
      int level = connection.getTransactionIsolation();
      if (level != Connection.TRANSACTION_READ_COMMITTED && level != Connection.TRANSACTION_READ_UNCOMMITTED) {
        // one snapshot for the whole transaction: a push could miss an acknowledgement that committed while it waited
        // for its partition and leave its message undelivered (ReadCommitted explains it)
        throw new IllegalStateException("commit(Connection) needs the caller's transaction at READ COMMITTED, and it is"
            + " at " + io.queen.embedded.internal.db.ReadCommitted.name(level) + ": Queen's statements read one snapshot"
            + " for the whole of such a transaction and could leave a pushed message undelivered. Nothing was done; run"
            + " this transaction at READ COMMITTED (Spring: @Transactional(isolation = Isolation.READ_COMMITTED)), or"
            + " use commit()");
      }
    } catch (SQLException e) {
      throw Sql.translate("transaction", e);
    }
    done = true;
    if (ops.isEmpty()) {
      return success(new Run());
    }
    Run run;
    Savepoint sp;
    try {
      sp = connection.setSavepoint();
    } catch (SQLException e) {
      throw Sql.translate("transaction", e);
    }
    try {
      run = apply(connection, true);
      if (run.failure != null) {
        connection.rollback(sp);
      }
      connection.releaseSavepoint(sp);
    } catch (SQLException e) {
      undo(connection, sp, e);
      throw Sql.translate("transaction", e);
    } catch (RuntimeException | Error e) {
      undo(connection, sp, e);
      throw e;
    }
    if (run.failure == null && !run.partitions.isEmpty()) {
      broker.pushes().wakeLocal(run.partitions.keySet()); // the caller has not committed yet: the NOTIFY inside it is the real wake-up
    }
    if (run.failure == null) {
      HandlerAcks.committed(ackedMessages()); // a consume loop's handler that acked its message itself: not again
    }
    return run.failure != null ? run.failure : success(run);
  }

  /** Rolls back to the bundle's savepoint: undoes the bundle's part only, the caller's transaction is theirs. */
  private static void undo(Connection c, Savepoint sp, Throwable cause) {
    try {
      c.rollback(sp);
    } catch (SQLException suppressed) {
      cause.addSuppressed(suppressed);
    }
  }

  /** The results of one run of the bundle (a retried transaction starts a new one). */
  private static final class Run {
    final List<PushResult> pushes = new ArrayList<>();
    final List<AckResult> acks = new ArrayList<>();
    final List<KvWriteResult> writes = new ArrayList<>();
    final List<KvEntry> reads = new ArrayList<>();
    /** The partitions that got a message, queue by queue: a commit Queen owns names them to the consume loops. */
    final Map<String, Set<String>> partitions = new LinkedHashMap<>();
    CommitResult failure;
  }

  private static CommitResult success(Run r) {
    return new CommitResult(true, null, -1, null, 0, List.copyOf(r.pushes), List.copyOf(r.acks), List.copyOf(r.writes),
        List.copyOf(r.reads));
  }

  /**
   * Whether the bundle is KV writes followed by acks under leases (once() per message + ack of the
   * batch): then it runs as one auto-commit call of {@code bundle_kv_ack_fenced}, which undoes itself when a
   * required write or a lease fails.
   */
  private boolean kvThenAcks() {
    int i = 0;
    while (i < ops.size() && ops.get(i) instanceof WriteOp) {
      i++;
    }
    if (i == 0 || i == ops.size()) {
      return false;
    }
    for (int j = i; j < ops.size(); j++) {
      if (!(ops.get(j) instanceof AckOp a) || a.acks().stream().anyMatch(r -> r.message().leaseId() == null)) {
        return false;
      }
    }
    return true;
  }

  private Run applyKvThenAcks(Connection c) throws SQLException {
    List<KvWrite> writes = new ArrayList<>();
    int w = 0;
    while (ops.get(w) instanceof WriteOp op) {
      writes.add(op.write());
      w++;
    }
    List<Broker.AckRequest> acks = new ArrayList<>();
    List<Integer> owner = new ArrayList<>();
    for (int j = w; j < ops.size(); j++) {
      for (Broker.AckRequest r : ((AckOp) ops.get(j)).acks()) {
        acks.add(r);
        owner.add(j);
      }
    }
    KvStore.BundleResult b = null;
    if (!acks.isEmpty() && writes.stream().allMatch(x -> x.op() == KvWrite.Op.PUT_IF_ABSENT)) {
      b = store.markersThenAck(c, writes, acks); // null: it did not apply, and the general call says why
      broker.metrics().markerStatement(b != null);
    }
    if (b == null) {
      b = store.writeThenAck(c, writes, acks);
    }
    Run run = new Run();
    run.writes.addAll(b.writes());
    run.acks.addAll(b.acks());
    if ("kv".equals(b.fail())) {
      KvWriteResult r = b.writes().get(b.writes().size() - 1);
      run.failure = new CommitResult(false, CommitResult.Reason.KV_PRECONDITION, b.writes().size() - 1, r.value(),
          r.version(), List.of(), List.of(), List.of(r), List.of());
    } else if ("lease".equals(b.fail()) || "done".equals(b.fail())) {
      // "done": an ack found its message acknowledged before the bundle; the writes were undone with it
      AckOutcome why = "lease".equals(b.fail()) ? AckOutcome.LEASE_LOST : AckOutcome.ALREADY_ACKED;
      int failed = -1;
      for (int k = 0; k < b.acks().size() && failed < 0; k++) {
        if (b.acks().get(k).outcome() == why) {
          failed = owner.get(k);
        }
      }
      run.failure = ackFailure(why, failed, b.acks(), owner);
    }
    return run;
  }

  /** The failure of a bundle whose ack op {@code failed} answered {@code why}, with that op's results. */
  private static CommitResult ackFailure(AckOutcome why, int failed, List<AckResult> results, List<Integer> owner) {
    List<AckResult> mine = new ArrayList<>();
    for (int k = 0; k < results.size(); k++) {
      if (owner.get(k) == failed) {
        mine.add(results.get(k));
      }
    }
    return new CommitResult(false, why == AckOutcome.LEASE_LOST ? CommitResult.Reason.LEASE_LOST
        : CommitResult.Reason.ALREADY_ACKED, failed, null, 0, List.of(), List.copyOf(mine), List.of(), List.of());
  }

  /** Whether the bundle pushes or writes: then an ack of a message another consumer finished fails the bundle. */
  private boolean hasEffects() {
    for (Op op : ops) {
      if (op instanceof PushOp || op instanceof WriteOp) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether the message of ack {@code k} (answered ALREADY_ACKED) was finished by another consumer: its lease no longer
   * holds the partition, and this call acknowledged nothing of the partition under that lease (which would have
   * released it by completing the leased range). Under the caller's own live lease an ALREADY_ACKED is a message it
   * acknowledged on its own before: a success that changes nothing, as for an ack alone.
   */
  private boolean finishedByAnother(Connection c, List<Broker.AckRequest> all, List<AckResult> results, int k)
      throws SQLException {
    Message m = all.get(k).message();
    if (m.leaseId() == null) {
      return false;
    }
    for (int j = 0; j < results.size(); j++) {
      Message o = all.get(j).message();
      if (results.get(j).outcome() == AckOutcome.ACKED && o.partitionId() == m.partitionId()
          && m.consumerGroup().equals(o.consumerGroup()) && m.leaseId().equals(o.leaseId())) {
        return false;
      }
    }
    try (java.sql.PreparedStatement st = c.prepareStatement("select 1 from " + broker.schema() + ".cursors"
        + " where partition_id = ? and group_name = ? and lease_id = ?")) {
      st.setLong(1, m.partitionId());
      st.setString(2, m.consumerGroup());
      st.setObject(3, m.leaseId());
      try (java.sql.ResultSet rs = st.executeQuery()) {
        return !rs.next();
      }
    }
  }

  private static String ackKey(Broker.AckRequest r) {
    Message m = r.message();
    return m.consumerGroup() + '\0' + m.partitionId() + '\0' + m.offset();
  }

  /** Runs the operations in order on {@code c}; stops at the first that fails the bundle. Does not roll back. */
  private Run apply(Connection c, boolean notifyInTransaction) throws SQLException {
    Run run = new Run();
    // joined to the caller's transaction (commit(Connection)), the caller's own work is an effect too
    boolean effects = notifyInTransaction || hasEffects();
    Set<String> ackedHere = new HashSet<>();
    int i = 0;
    while (i < ops.size() && run.failure == null) {
      Op op = ops.get(i);
      if (op instanceof PushOp) {
        int end = i;
        List<PushItem> items = new ArrayList<>();
        List<String> payloads = new ArrayList<>();
        while (end < ops.size() && ops.get(end) instanceof PushOp p) {
          items.add(p.item());
          payloads.add(p.payloadJson());
          end++;
        }
        for (PushResult r : broker.pushes().push(c, items, payloads, notifyInTransaction)) {
          run.pushes.add(new PushResult(run.pushes.size(), r.queue(), r.partition(), r.status(), r.messageId(), r.offset(),
              r.transactionId()));
          if (r.status() == PushStatus.QUEUED) {
            run.partitions.computeIfAbsent(r.queue(), k -> new LinkedHashSet<>()).add(r.partition());
          }
        }
        i = end;
      } else if (op instanceof AckOp) {
        int end = i;
        List<Broker.AckRequest> all = new ArrayList<>();
        List<Integer> owner = new ArrayList<>(); // op index of each request
        while (end < ops.size() && ops.get(end) instanceof AckOp a) {
          for (Broker.AckRequest r : a.acks()) {
            all.add(r);
            owner.add(end);
          }
          end++;
        }
        List<AckResult> results = all.isEmpty() ? List.of() : broker.ack(c, all);
        for (int k = 0; k < results.size() && run.failure == null; k++) {
          if (results.get(k).outcome() == AckOutcome.LEASE_LOST) {
            run.failure = ackFailure(AckOutcome.LEASE_LOST, owner.get(k), results, owner);
          }
        }
        for (int k = 0; k < results.size() && run.failure == null; k++) {
          // acknowledged before this bundle by another consumer that took the partition over: its pushes and writes
          // would repeat that consumer's effects (bundle_kv_ack_fenced applies the same rule in SQL)
          boolean first = ackedHere.add(ackKey(all.get(k)));
          if (effects && first && results.get(k).outcome() == AckOutcome.ALREADY_ACKED
              && finishedByAnother(c, all, results, k)) {
            run.failure = ackFailure(AckOutcome.ALREADY_ACKED, owner.get(k), results, owner);
          }
        }
        run.acks.addAll(results);
        i = end;
      } else if (op instanceof WriteOp) {
        // a run of consecutive writes goes in one call; it stops at the first required write that fails
        int end = i;
        List<KvWrite> writes = new ArrayList<>();
        while (end < ops.size() && ops.get(end) instanceof WriteOp w) {
          writes.add(w.write());
          end++;
        }
        List<KvWriteResult> results = store.writeMany(c, writes);
        for (int k = 0; k < results.size(); k++) {
          KvWriteResult r = results.get(k);
          if (!r.applied() && writes.get(k).required()) {
            run.failure = new CommitResult(false, CommitResult.Reason.KV_PRECONDITION, i + k, r.value(), r.version(),
                List.of(), List.of(), List.of(r), List.of());
          }
          run.writes.add(r);
        }
        i = end;
      } else if (op instanceof GetOp g) {
        run.reads.add(store.get(c, g.namespace(), g.key()));
        i++;
      } else if (op instanceof GetManyOp g) {
        run.reads.addAll(store.getMany(c, g.namespace(), g.keys()));
        i++;
      } else {
        throw new IllegalStateException("unknown operation " + op);
      }
    }
    return run;
  }

  @Override
  public String toString() {
    return "Transaction[" + ops.size() + " operations" + (done ? ", committed" : "") + "]";
  }
}
