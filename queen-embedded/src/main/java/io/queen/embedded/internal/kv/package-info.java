/**
 * Queen's KV store and its sweeper. Unsupported: anything in this package may change without notice;
 * use {@link io.queen.Kv} and {@link io.queen.Transaction}.
 */
package io.queen.embedded.internal.kv;
