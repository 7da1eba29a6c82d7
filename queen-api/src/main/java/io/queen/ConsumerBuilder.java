package io.queen;

import java.time.Duration;
import java.time.Instant;
import java.util.List;

/**
 * Reads a queue for one consumer group: {@link #pop()} once, or {@link #consume} with worker threads.
 * Also moves the group's cursors ({@link #seek}) and deletes the group.
 *
 * <p>A builder: each setter changes this object and returns it; not thread-safe. {@link #pop()} may be
 * called repeatedly and from one thread at a time.
 */
public interface ConsumerBuilder {
  /** Default {@link #batch}: {@value}. */
  int DEFAULT_BATCH = 1;
  /** Default {@link #concurrency}: {@value}. */
  int DEFAULT_CONCURRENCY = 1;

  String queue();

  /** The group ({@link Queen#DEFAULT_GROUP} for the queue's own group). */
  String group();

  /** Most messages one pop returns, over all its partitions (1..10,000; default 1). */
  ConsumerBuilder batch(int batch);

  /**
   * Most partitions one pop may take leases on (1..1,000). For {@link #pop()} the default is 1. For the
   * consume loop the default is as many as it has idle workers for (a per-message handler) or as many as
   * {@link #batch} (a batch handler, whose batch may then span partitions); set it to cap that.
   */
  ConsumerBuilder partitions(int partitions);

  /** Pop only this partition. */
  ConsumerBuilder partition(String partition);

  /** How long an empty pop waits for a push (0..5 min; default 0: return at once). */
  ConsumerBuilder waitFor(Duration wait);

  /** Where a group that Queen has not seen before starts (named groups only; default {@code NEW}). */
  ConsumerBuilder subscription(SubscriptionMode mode);

  /** A group that Queen has not seen before starts at messages created at or after {@code from}. */
  ConsumerBuilder subscriptionFrom(Instant from);

  /** Acknowledge on delivery: no lease, the cursor moves at once (at-most-once). Default false. */
  ConsumerBuilder autoAck(boolean autoAck);

  /** Override the queue's lease time for these pops (100 ms .. 1 day). */
  ConsumerBuilder leaseTime(Duration leaseTime);

  /** Worker threads of {@link #consume} (1..256; default 1). */
  ConsumerBuilder concurrency(int workers);

  /** How long {@link Subscription#close()} waits for running handlers (default 10 s). */
  ConsumerBuilder gracePeriod(Duration grace);

  /**
   * Pops once. Empty when nothing is available (after waiting up to {@link #waitFor}). A pop of a queue that
   * does not exist returns nothing and creates nothing — no queue, no group — so a misspelt name cannot mint a
   * queue; a named group is then subscribed by its first pop after the queue exists (create the queue first
   * with {@link QueueClient#configure} when a {@code NEW} group must see its first messages).
   */
  List<Message> pop();

  /**
   * Starts workers that call {@code handler} once per message, in offset order per partition. When the
   * queue does not exist yet, nothing is created: the workers wait for it (saying so once at WARN), and a
   * named group then reads the queue from its first message, since all of it was pushed after this call.
   * A round that fails (the database unreachable, say) is retried after a backoff that doubles from 50 ms
   * up to four poll intervals, and resets after a round that works.
   *
   * <p>A handler that acknowledges its message itself, in a bundle it commits on the same thread (typically
   * {@code queen.transaction().ack(msg).commit(connection)} inside the application's own transaction), is not
   * acknowledged again by the loop.
   */
  Subscription consume(MessageHandler handler);

  /** Starts workers that call {@code handler} once per popped batch; otherwise as {@link #consume}. */
  Subscription consumeBatch(BatchHandler handler);

  /**
   * Starts workers that call {@code handler} once per message with a fresh {@link Transaction}; the loop
   * adds the message's acknowledgement to it and commits, so the handler's effects, its idempotency
   * marker and the ack are one commit. See {@link TransactionalHandler} for what each outcome does.
   */
  Subscription consumeInTransaction(TransactionalHandler handler);

  /**
   * Starts workers that call {@code handler} once per popped batch with one {@link Transaction} that the
   * loop commits with the acknowledgement of the whole batch. See {@link TransactionalBatchHandler}.
   */
  Subscription consumeBatchInTransaction(TransactionalBatchHandler handler);

  /**
   * Moves the group's cursor of every partition to just before the first message created at or after
   * {@code time}; releases the group's leases. Returns the number of partitions moved.
   *
   * <p>The three seeks move a group that exists (one that has consumed the queue at least once). A group or
   * queue that does not exist is refused with an {@link IllegalArgumentException} that names it (and the
   * queue's groups), and nothing is created: a seek of a misspelt group would otherwise subscribe a group that
   * holds back the queue's retention until someone deletes it. A new group starts where {@link
   * #subscription(SubscriptionMode)} or {@link #subscriptionFrom(Instant)} says when it first consumes.
   */
  int seek(Instant time);

  /**
   * Moves the group's cursors to the end (skips everything stored); releases leases. The group must exist, as
   * for {@link #seek(Instant)}.
   */
  int seekToEnd();

  /**
   * Moves the group's cursors to the beginning (redelivers everything stored); releases leases. The group must
   * exist, as for {@link #seek(Instant)}.
   */
  int seekToBeginning();

  /** Forgets the group: its cursors, leases and dead letters. The next use subscribes it anew. */
  void delete();
}
