package io.queen;

import java.util.List;

/**
 * Handles one popped batch inside one transaction the consume loop commits, together with the
 * acknowledgement of the whole batch. The outcomes are those of {@link TransactionalHandler}, with two
 * batch rules:
 * <ul>
 *   <li>{@code KV_PRECONDITION} with reason {@link KvReason#EXISTS} (some message's marker is already
 *       there): nothing was applied, and the loop cannot know which message was done, so it runs the
 *       handler again for each message of the batch alone, each in its own transaction; the ones already
 *       done are acknowledged, the others apply.
 *   <li>{@code LEASE_LOST}: the partitions whose lease was lost belong to another consumer now; the
 *       leases still held for the other partitions of the batch are given back without counting an
 *       attempt, so their messages are redelivered at once.
 * </ul>
 * An exception fails the first message of each partition in the batch (the rest is redelivered with it).
 */
@FunctionalInterface
public interface TransactionalBatchHandler {
  void handle(List<Message> batch, Transaction tx) throws Exception;
}
