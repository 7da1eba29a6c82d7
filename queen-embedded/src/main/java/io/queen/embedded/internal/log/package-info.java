/**
 * Queen's log: push ({@code Pusher}, combined per partition by {@code PartitionLanes}), pop, acknowledge, renew and
 * release ({@code Broker}), the queue catalogue, as calls of the SQL functions; generated ids and push receipts,
 * payload encoding and sealing, and the wake-ups a push sends to waiting pops. Unsupported: anything in this package
 * may change without notice; use the {@code io.queen} API.
 */
package io.queen.embedded.internal.log;
