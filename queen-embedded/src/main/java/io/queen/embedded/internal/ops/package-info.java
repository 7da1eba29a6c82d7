/**
 * What keeps a node running and tells its operator about it: the node's heartbeat, retention, the statistics
 * guard, the status reader and the metrics. Unsupported: anything in this package may change without notice; use
 * {@link io.queen.Queen#status()} and {@code io.queen.embedded.QueenMeterBinder}.
 */
package io.queen.embedded.internal.ops;
