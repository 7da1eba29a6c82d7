package io.queen.pgconn.internal.source;

import java.util.List;

/**
 * One decoded pgoutput message (protocol version 1, text values; PostgreSQL's "Logical Replication Message
 * Formats"). LSNs are unsigned 64-bit positions held in a {@code long}; times are microseconds since the Unix
 * epoch (already shifted from PostgreSQL's 2000-01-01 epoch).
 */
public sealed interface PgMessage {

  /** 'B': a transaction starts. {@code finalLsn} is the LSN of its commit record. */
  record Begin(long finalLsn, long commitTimeMicros, long xid) implements PgMessage {}

  /** 'C': a transaction ends. {@code endLsn} is what the source confirms once Queen holds the transaction. */
  record Commit(long commitLsn, long endLsn, long commitTimeMicros) implements PgMessage {}

  /** 'O': the changes that follow were replicated in from another origin. */
  record Origin(long originCommitLsn, String name) implements PgMessage {}

  /**
   * 'R': the shape of a table, sent before its first change in a session and again after any change of
   * shape. {@code replicaIdentity} is 'd' (default: the primary key), 'n' (nothing), 'f' (full) or 'i' (index).
   */
  record Relation(int oid, String schema, String name, char replicaIdentity, List<Column> columns)
      implements PgMessage {
    /** {@code key}: part of the replica identity. {@code typeOid} resolves through pg_type for non-built-ins. */
    public record Column(boolean key, String name, int typeOid, int typmod) {}
  }

  /** 'Y': a non-built-in type's name (enums, domains, composites, arrays of them). */
  record Type(int oid, String schema, String name) implements PgMessage {}

  /** 'I'. */
  record Insert(int relationOid, Tuple after) implements PgMessage {}

  /**
   * 'U'. {@code oldKind} is 'K' (the old key, when a key column changed), 'O' (the whole old row, replica
   * identity full) or 0 with {@code before} null (the key did not change).
   */
  record Update(int relationOid, char oldKind, Tuple before, Tuple after) implements PgMessage {}

  /** 'D'. {@code oldKind} is 'K' or 'O'. */
  record Delete(int relationOid, char oldKind, Tuple before) implements PgMessage {}

  /** 'T'. {@code options}: bit 1 CASCADE, bit 2 RESTART IDENTITY. */
  record Truncate(List<Integer> relationOids, int options) implements PgMessage {}

  /** 'M': a {@code pg_logical_emit_message}; non-transactional ones arrive outside any Begin/Commit. */
  record LogicalMessage(boolean transactional, long lsn, String prefix, byte[] content) implements PgMessage {}

  /**
   * A row's column values in the order of the relation's columns (generated columns are never sent).
   * {@code kinds[i]} is 'n' (NULL), 'u' (an unchanged TOASTed value that was not logged: never turn it into
   * NULL) or 't' (text in {@code texts[i]}, PostgreSQL's output form under the walsender's settings).
   */
  record Tuple(char[] kinds, String[] texts) {
    public int size() {
      return kinds.length;
    }
  }
}
