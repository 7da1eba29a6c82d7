/**
 * Queen's log: push, pop, acknowledge, renew and release as calls of the SQL functions, the pushes combined per
 * partition, payload encoding and sealing, and the wake-ups a push sends to waiting pops. Unsupported: anything in
 * this package may change without notice; use the {@code io.queen} API.
 */
package io.queen.embedded.internal.log;
