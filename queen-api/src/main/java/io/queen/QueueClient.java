package io.queen;

import java.util.List;
import java.util.function.UnaryOperator;

/**
 * Operations on one queue. Cheap to create; holds no state besides the name; thread-safe.
 */
public interface QueueClient {
  String name();

  /**
   * Creates the queue if needed and changes its configuration: the function receives a builder holding
   * the current values. Validation happens before anything is written.
   */
  QueueConfig configure(UnaryOperator<QueueConfig.Builder> change);

  /** The current configuration ({@link QueueConfig#DEFAULTS} for a queue that does not exist yet). */
  QueueConfig config();

  /** A handle on one partition of this queue. */
  PartitionClient partition(String partition);

  /**
   * Pushes one payload to the {@link Queen#DEFAULT_PARTITION default partition}. Retried by Queen on transient
   * failures like {@link #push(List)}.
   */
  PushResult push(Object payload);

  /**
   * Pushes items to their partitions of this queue, in one transaction; results in request order. Items may
   * name this queue or none.
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
   * {@link PushOutcomeUnknownException#items() items()} again (here or with {@link Queen#push}), which carry the transaction ids this push used
   * — not your original items, whose missing ids would be generated anew — and each comes back QUEUED or
   * DUPLICATE with the stored message: stored exactly once either way. Any other
   * {@link QueenDatabaseException} means nothing of the batch was stored (no try reached the database, or each
   * one was rolled back): push the same items again. A push on your own connection (a
   * {@link Transaction#commit(java.sql.Connection)}) is never retried by Queen.
   */
  List<PushResult> push(List<PushItem> items);

  /** A consumer on this queue's default group (competing consumers, reads from the beginning). */
  ConsumerBuilder consumer();

  /** A consumer on a named group (its own cursor per partition). */
  ConsumerBuilder group(String group);

  /** Deletes the queue with all its partitions, messages, cursors and dead letters. */
  void delete();

  /**
   * The queue's partitions in name order (the order of the partitions' index, the database's collation),
   * {@code limit} (1..1000) of them after {@code after} (null: from the first), each with its offsets and every group's
   * cursor and lease: what an operator looks at when one partition is stuck. Keyset paging: pass the last name of a page as the next {@code after}. An unknown queue has
   * none.
   */
  java.util.List<Status.PartitionStatus> partitions(String after, int limit);
}
