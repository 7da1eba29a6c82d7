/**
 * Postgres connectors for Queen: a source that streams a table into a queue through logical replication
 * (pgoutput), and a sink that writes a queue into a table. Not built yet: this module is a placeholder
 * so the layout and the dependency direction (queen-pgconn depends on queen-embedded) are fixed. See
 * the module README.
 */
package io.queen.pgconn;
