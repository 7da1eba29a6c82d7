/**
 * Postgres connectors for Queen: the connector registry ({@link io.queen.Queen#connectors()}) and the sink
 * that writes a queue into a table exactly once. Everything is found through
 * {@link java.util.ServiceLoader}: put this module on the classpath next to queen-embedded. The
 * implementation is in {@code io.queen.pgconn.internal}. See the module README.
 */
package io.queen.pgconn;
