package io.queen.embedded.internal.tx;

import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.CommitResult;
import io.queen.KvOptions;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Transaction;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.kv.KvStore;
import io.queen.embedded.internal.kv.KvWrite;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.HandlerAcks;
import io.queen.embedded.internal.log.Metrics;
import io.queen.embedded.internal.tx.Op.AckOp;
import io.queen.embedded.internal.tx.Op.GetManyOp;
import io.queen.embedded.internal.tx.Op.GetOp;
import io.queen.embedded.internal.tx.Op.PushOp;
import io.queen.embedded.internal.tx.Op.WriteOp;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
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
 * added, one statement per KV operation and one per run of consecutive pushes or acks
 * ({@link BundleStatements}; this class owns the transaction they run in). The first
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
  /** Runs {@link #ops} on a connection at commit. */
  private final BundleStatements statements;
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
    this.statements = new BundleStatements(broker, store, ops);
  }

  // --------------------------------------------------------------------------------------- building

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
      run = ops.isEmpty() ? new Run() : statements.apply(raw, true);
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
    return run.success();
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
      return new Run().success();
    }
    Run run = statements.kvThenAcks()
        ? Sql.autoCommit(broker.dataSource(), "transaction", statements::applyKvThenAcks)
        : Sql.inTransaction(broker.dataSource(), "transaction", c -> {
      Run r = statements.apply(c, false);
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
    return run.failure != null ? run.failure : run.success();
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
      return new Run().success();
    }
    Run run;
    Savepoint sp;
    try {
      sp = connection.setSavepoint();
    } catch (SQLException e) {
      throw Sql.translate("transaction", e);
    }
    try {
      run = statements.apply(connection, true);
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
    return run.failure != null ? run.failure : run.success();
  }

  /** Rolls back to the bundle's savepoint: undoes the bundle's part only, the caller's transaction is theirs. */
  private static void undo(Connection c, Savepoint sp, Throwable cause) {
    try {
      c.rollback(sp);
    } catch (SQLException suppressed) {
      cause.addSuppressed(suppressed);
    }
  }

  @Override
  public String toString() {
    return "Transaction[" + ops.size() + " operations" + (done ? ", committed" : "") + "]";
  }
}
