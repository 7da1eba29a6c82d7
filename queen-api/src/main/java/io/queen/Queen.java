package io.queen;

import java.util.List;

/**
 * A started Queen node: the entry point to queues, acknowledgements, transactions and the KV store.
 * Obtain one from {@code io.queen.embedded.EmbeddedQueen.builder()}.
 *
 * <p>Thread-safe: one instance per application is meant to be shared by all threads. Every JVM that
 * starts Queen against the same database is a node of one cluster; PostgreSQL is the only shared
 * state.
 *
 * <p>{@link #close()} is idempotent and bounded: it stops taking work, lets running handlers finish
 * up to the grace period (one period shared by all subscriptions; what a handler pushes, writes or commits
 * in it counts; called from a handler, {@code close()} returns at once and the close goes on once the
 * handler has returned), releases every lease this node holds (those of its subscriptions and those
 * taken by a manual {@link ConsumerBuilder#pop()}, without counting an attempt), removes the node's
 * heartbeat row (so a restart with the same node id starts at once) and closes the connections Queen
 * opened. It never closes the application's {@code DataSource}. After it, every call
 * that does work — on this object or on the queue, consumer, KV, transaction and dead-letter objects
 * obtained from it, before or after the close — throws {@link BrokerClosedException}; only getters and
 * builder setters (and {@link #close()} itself) still answer.
 *
 * <p>Every node heartbeats on the database clock; a node whose heartbeat is older than its session
 * timeout is dead, and its leases are free to take before their lease time ends (a crash stalls a
 * partition for about one session timeout). A node id held by a live node cannot be started twice
 * ({@link NodeIdInUseException}).
 *
 * <p>A refused login (wrong password, unknown role) is a {@link DatabaseLoginException}; any other
 * database failure a {@link QueenDatabaseException}.
 */
public interface Queen extends AutoCloseable {
  /** The partition a push uses when it names none. */
  String DEFAULT_PARTITION = "Default";
  /** The consumer group of a pop or consume that names none: the queue's competing-consumers group. */
  String DEFAULT_GROUP = "__QUEUE_MODE__";

  /**
   * The version of Queen on the classpath, e.g. {@code 0.1.0}: from the jar's manifest
   * ({@code Implementation-Version}), else from the build's {@code io/queen/version.properties}, else
   * {@code "unknown"}.
   */
  static String version() {
    return Versions.VERSION;
  }

  /** A handle on a queue (created on first push or {@link QueueClient#configure}). Cheap; not cached. */
  QueueClient queue(String name);

  /**
   * Pushes items that name their queues ({@link PushItem#to}) in one transaction; results in request order.
   *
   * <p><b>Retries.</b> A push that fails on a transient error (the connection lost or its backend terminated,
   * {@code pg_terminate_backend} / admin shutdown 57P01, a serialization failure, a deadlock, a lock timeout)
   * is tried again by Queen, with jittered back-off from 10 ms up to 500 ms, until the node's
   * {@code connectTimeout} (default 5 s) has passed since the first failure. Every item carries a transaction
   * id (yours, or one Queen generated: {@link PushResult#transactionId()}) and the same message id in every
   * try, so when a try's connection was lost and it may have committed, the next try de-duplicates: an item
   * that try stored is reported {@link PushStatus#QUEUED} with the stored message's id and offset, exactly as
   * if the push had worked the first time. Only an item whose transaction id was stored by an earlier,
   * separate push (or repeated within the batch) is {@link PushStatus#DUPLICATE}.
   *
   * <p><b>When it throws.</b> A {@link PushOutcomeUnknownException} (a transient
   * {@link QueenDatabaseException}) means Queen gave up while the outcome of a try was unknown: push its
   * {@link PushOutcomeUnknownException#items() items()} again, which carry the transaction ids this push used
   * — not your original items, whose missing ids would be generated anew — and each comes back QUEUED or
   * DUPLICATE with the stored message: stored exactly once either way. Any other
   * {@link QueenDatabaseException} means nothing of the batch was stored (no try reached the database, or each
   * one was rolled back): push the same items again. A push on your own connection (a
   * {@link Transaction#commit(java.sql.Connection)}) is never retried by Queen.
   */
  List<PushResult> push(List<PushItem> items);

  /** Acknowledges a message as completed. */
  AckResult ack(Message message);

  /** Acknowledges a message with a status; {@code error} is kept with failures and dead letters. */
  AckResult ack(Message message, AckStatus status, String error);

  /** Acknowledges messages as completed, in one transaction; results in the order given. */
  List<AckResult> ack(List<Message> messages);

  /** Acknowledges messages with one status, in one transaction; results in the order given. */
  List<AckResult> ack(List<Message> messages, AckStatus status, String error);

  /**
   * Extends the lease under which {@code message} was delivered by the queue's lease time.
   *
   * @return false when the lease had already expired or was taken over (then nothing changed)
   */
  boolean renew(Message message);

  /** The dead-letter queue of a queue. */
  DeadLetters deadLetters(String queue);

  /** A new transaction bundle: pushes, acks and KV writes committed together. Not thread-safe. */
  Transaction transaction();

  /** The transactional key/value store. */
  Kv kv();

  /**
   * The connector registry (Postgres sinks and sources). Needs {@code io.queen:queen-pgconn} on the
   * classpath; without it this throws {@link UnsupportedOperationException} naming that dependency.
   */
  default Connectors connectors() {
    throw new UnsupportedOperationException(CONNECTORS_MISSING);
  }

  /** The message of {@link #connectors()} when queen-pgconn is not on the classpath. */
  String CONNECTORS_MISSING = "connectors need the module io.queen:queen-pgconn on the classpath: add the Maven"
      + " dependency <groupId>io.queen</groupId><artifactId>queen-pgconn</artifactId> next to queen-embedded";

  /** A consistent snapshot of queues, partitions, group lag and leases. */
  Status status();

  /**
   * Runs one retention pass now, in the calling thread, instead of waiting for the janitor (every 30 s on nodes
   * started with the janitor): removes the messages of queues with {@code retention} or {@code completedRetention}
   * that may go (docs/retention.md), in small transactions, and refreshes the retention state that
   * {@link #status()} shows. One node at a time: when another node is running retention this returns at once
   * with {@code ran() == false}. An operator call (and the way tests drive retention without waiting).
   */
  RetentionRun runRetentionNow();

  /**
   * This node's id (given to the builder or generated), used as lease owner, in thread names and as the key
   * of the node's heartbeat row.
   */
  String nodeId();

  /**
   * Stops this node; see the class description. Idempotent. The leases this node still holds are given back
   * in one statement bounded by 2 s; when that fails (the database is unreachable) the failure is logged at
   * WARN and the close goes on: the leases then expire by themselves (or are taken once the node's heartbeat
   * is older than its session timeout), which counts one attempt.
   *
   * <p>Running handlers get the close grace period ({@code closeGracePeriod}, 10 s by default) to finish; then they
   * are interrupted, the connections of transactional handlers that took {@link Transaction#connection()} are
   * aborted, and the close waits at most half a second more for all of them together. So {@code close()} returns
   * within the grace period plus about half a second, plus the lease give-back's 2 s bound when the database does
   * not answer. When it returns, no bundle of a transactional handler can commit any more (its message is delivered
   * again and its marker decides). A plain handler blocked where an interrupt does not reach (a JDBC call on its
   * own connection, a socket read) may still be running: its message's lease was given back, so the message can be
   * delivered again meanwhile, and an outside effect it then makes happens twice unless it is idempotent. Do effects
   * that must happen once in a transactional handler.
   */
  @Override
  void close();
}
