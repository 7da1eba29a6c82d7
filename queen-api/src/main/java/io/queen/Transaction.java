package io.queen;

import java.sql.Connection;
import java.util.Collection;
import java.util.List;

/**
 * A bundle of pushes, acks and KV operations that commits as one PostgreSQL transaction: all or
 * nothing. Build it, then {@link #commit()} (Queen owns the transaction and retries serialization
 * failures and deadlocks a bounded number of times) or {@link #commit(Connection)} (inside the caller's
 * own transaction: Queen neither commits, rolls back, nor changes auto-commit; the caller's commit
 * decides).
 *
 * <p>A lost precondition of a {@link KvOptions#required() required} KV write, or an ack whose lease
 * expired or was taken over, rolls the whole bundle back and is reported as a {@link CommitResult}
 * with {@code success=false}, never as an exception. Infrastructure failures are exceptions.
 *
 * <p>A bundle may touch a given KV key at most once (reads count); a second touch fails at once with
 * {@link IllegalArgumentException}, before anything is sent. Every other argument is checked when the
 * operation is added, too. Operations run in the order they were added. A non-required KV write that
 * does not apply reports why in {@link CommitResult#writes()} and the rest commits. There is no
 * {@code getPrefix} here on purpose: its cost is unbounded and a bundle holds locks; use
 * {@link Kv#getPrefix} outside.
 *
 * <p>Pushed items get transaction ids like any push: the caller's, or one Queen generates (the text of the
 * message's id, see {@link PushResult#transactionId()}).
 *
 * <p><b>What is retried.</b> {@link #commit()} retries serialization failures, deadlocks and lock timeouts
 * (the transaction was rolled back, so nothing of it applied). It does <em>not</em> retry a commit whose
 * connection was lost: the outcome is then unknown, and a bundle with acks and KV writes cannot be told
 * apart from its own earlier try by transaction ids (its {@code once} would report {@code EXISTS}, an
 * {@code incr} would count twice). That surfaces as a transient {@link QueenDatabaseException}: check what
 * the bundle did (its marker, its ack) before running it again, or use {@link Queen#push} for pushes alone,
 * which Queen retries safely. {@link #commit(Connection)} is never retried by Queen: the caller owns the
 * transaction.
 *
 * <p>Not thread-safe; commit once (a second commit, or adding after a commit, is an
 * {@link IllegalStateException}).
 */
public interface Transaction {
  Transaction push(String queue, String partition, Object payload);

  /** Pushes an item that names its queue ({@link PushItem#to}). */
  Transaction push(PushItem item);

  Transaction ack(Message message);

  Transaction ack(Message message, AckStatus status, String error);

  Transaction ack(List<Message> messages);

  Transaction put(String namespace, String key, Object value, KvOptions options);

  Transaction putIfAbsent(String namespace, String key, Object value, KvOptions options);

  /** An idempotency marker: putIfAbsent of {@code true}. */
  Transaction once(String namespace, String key, KvOptions options);

  Transaction incr(String namespace, String key, long delta, KvOptions options);

  Transaction delete(String namespace, String key);

  Transaction delete(String namespace, String key, long expectVersion, boolean required);

  /** Reads a key inside the transaction (results in {@link CommitResult#reads()}). */
  Transaction get(String namespace, String key);

  /** Reads keys inside the transaction (results in {@link CommitResult#reads()}). */
  Transaction getMany(String namespace, Collection<String> keys);

  /**
   * The JDBC connection of this very transaction, for a transactional handler's own SQL: what the handler
   * writes on it, the bundle's pushes, KV writes and the message's acknowledgement commit as one PostgreSQL
   * transaction, or none of it does.
   *
   * <pre>{@code
   * queen.queue("orders").group("fulfilment").consumeInTransaction((msg, tx) -> {
   *   try (PreparedStatement st = tx.connection().prepareStatement(
   *       "insert into shipments (order_id, address) values (?, ?)")) {
   *     st.setLong(1, msg.payload().get("id").asLong());
   *     st.setString(2, msg.payload().get("address").asText());
   *     st.executeUpdate();
   *   }
   *   tx.once("fulfilment", "shipped:" + msg.payload().get("id").asLong(), Kv.ttl(Duration.ofDays(7)).required());
   * });
   * }</pre>
   *
   * <p>Available on the transaction the consume loop hands a {@link TransactionalHandler} or
   * {@link TransactionalBatchHandler}. The connection comes from Queen's {@code DataSource} on the first call
   * (so a handler that never asks holds none), in a transaction at READ COMMITTED; it stays the handler's until
   * the loop commits or rolls back, then goes back to the pool. Each concurrent handler that asks holds one, so
   * give Queen's pool at least {@code concurrency} connections more than it needs otherwise. When the bundle does
   * not commit (a marker already there, a lost lease, the handler throws), the handler's own statements are rolled
   * back with it. The handler must not commit, roll back, change auto-commit or close the connection: those
   * calls throw {@link IllegalStateException} (closing is allowed and does nothing). Savepoints are the handler's
   * to use.
   *
   * @throws IllegalStateException on a transaction from {@link Queen#transaction()}: run your SQL on your own
   *     connection and join the bundle to it with {@link #commit(Connection)}; or after the commit
   */
  Connection connection();

  /**
   * Commits as Queen's own transaction. A bundle whose {@link #connection()} was taken commits on that connection,
   * with what the handler wrote on it, and is not retried (the handler's statements cannot be run again here).
   */
  CommitResult commit();

  /**
   * Applies the bundle on {@code connection}, inside the caller's transaction (the connection must have
   * auto-commit off, else {@link IllegalStateException}). On a lost precondition or lease, or an
   * exception, Queen rolls back to a savepoint it set, so nothing of the bundle remains; the caller's
   * transaction stays usable. Queen never commits, rolls back the caller's work, or changes auto-commit;
   * serialization failures are not retried here (the caller owns the transaction).
   */
  CommitResult commit(Connection connection);
}
