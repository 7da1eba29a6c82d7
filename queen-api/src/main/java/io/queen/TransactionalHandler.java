package io.queen;

/**
 * Handles one message of a subscription inside a transaction the consume loop commits: the handler writes
 * its own rows on {@link Transaction#connection() tx.connection()} and adds its other effects to {@code tx}
 * (pushes, KV writes such as an idempotency marker) and returns; the loop adds the message's acknowledgement
 * to the same bundle and commits it. The handler's rows, the effect, the marker and the cursor advance are one
 * PostgreSQL commit.
 *
 * <pre>{@code
 * queen.queue("orders").group("billing").consumeInTransaction((msg, tx) -> {
 *   Order order = msg.payload(Order.class);
 *   try (PreparedStatement st = tx.connection().prepareStatement("insert into charges (order_id) values (?)")) {
 *     st.setLong(1, order.id());
 *     st.executeUpdate();
 *   }
 *   tx.once("billing", "charged:" + order.id(), Kv.ttl(Duration.ofDays(7)).required())
 *     .push("receipts", msg.partition(), receiptFor(order));
 * });
 * }</pre>
 *
 * <p>Key the marker by what must happen once (the order's id), not by {@link Message#stateKey}: that is
 * one key per partition and group, so as a marker it would mark the whole partition done.
 *
 * <p>What the loop does with the outcome of the commit:
 * <ul>
 *   <li>committed: the message is done (counted in {@link Subscription#acked()}).
 *   <li>{@link CommitResult.Reason#KV_PRECONDITION} with reason {@link KvReason#EXISTS} (a
 *       {@code once()}/{@code putIfAbsent} marker, or a {@code put} with {@code expect(0)}, that is already
 *       there): the work was done before, by this or another consumer. Nothing of the bundle was applied;
 *       the loop acknowledges the message on its own and goes on ({@link Subscription#alreadyDone()}).
 *       Mark the marker {@link KvOptions#required() required()}: a write that is not required never stops
 *       the bundle, so the effect would commit a second time beside it (the loop logs a WARN when it sees a
 *       committed bundle whose marker was already there).
 *   <li>{@code KV_PRECONDITION} with another reason (VERSION, ABSENT, LIMIT, TYPE): the message fails,
 *       as if the handler had thrown, and is retried under the queue's retry rules.
 *   <li>{@link CommitResult.Reason#LEASE_LOST}: another consumer has the partition (this one overran its
 *       lease). Nothing was applied; the loop drops the rest of that partition's batch without counting a
 *       failure ({@link Subscription#leaseLost()}). {@link CommitResult.Reason#ALREADY_ACKED} is the same case
 *       one step later (the other consumer has finished the message already) and is counted the same way.
 *       Without a marker too, a consumer that stalled past its lease never commits its effect a second time.
 *   <li>the handler throws: nothing of the bundle is applied and the message fails (attempt counted), as
 *       with {@link MessageHandler}.
 *   <li>the commit fails on a transient database error (connection lost, shutdown): the outcome is
 *       unknown, so the loop gives the partition's lease back without counting an attempt; the message is
 *       redelivered and its marker tells whether the first commit happened.
 * </ul>
 *
 * <p>In every case where nothing of the bundle applies, what the handler wrote on {@code tx.connection()} is rolled
 * back with it. The handler must not commit {@code tx} itself, nor acknowledge the message in it, nor end the
 * transaction of {@code tx.connection()}. The lease is renewed while the handler runs.
 */
@FunctionalInterface
public interface TransactionalHandler {
  void handle(Message message, Transaction tx) throws Exception;
}
