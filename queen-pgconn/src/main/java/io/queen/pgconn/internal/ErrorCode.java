package io.queen.pgconn.internal;

import io.queen.ConnectorException;

/** The closed set of connector error codes, each with the sentence that names the fix (README table). */
enum ErrorCode {
  NO_ENCRYPTION_KEY("no_encryption_key", "the document carries a password but this node has no encryption key: set"
      + " QUEEN_ENCRYPTION_KEY (64 hex digits) or the builder's encryptionKey(...), the same on every node"),
  WRONG_ENCRYPTION_KEY("wrong_encryption_key", "the stored password was sealed with another key (the GCM tag does not"
      + " match): give this node the key the other nodes use, or put the document again with the password"),
  CONNECT_FAILED("connect_failed", "cannot reach the target database: check connection.host, port, sslMode and that"
      + " PostgreSQL accepts connections from this node; retried at every re-read"),
  LOGIN_FAILED("login_failed", "the target database refused the login: check connection.user and password"),
  TABLE_MISSING("table_missing", "the sink's table does not exist: create it (the sink never creates or alters it)"),
  NO_KEY("no_key", "modes upsert and cdc need a primary key or a unique index on the table: add one"),
  PRIVILEGES("privileges", "the sink's role lacks a privilege on the table: GRANT INSERT, UPDATE, DELETE (and"
      + " TRUNCATE for cdc with truncates) to it"),
  METADATA_COLUMN_MISSING("metadata_column_missing", "a column named in sink.metadata does not exist (or is generated):"
      + " add it or fix the document"),
  PROGRESS_TABLE("progress_table", "the progress table queen.sink_progress cannot be created or has another shape:"
      + " create it as the README shows, or grant CREATE on the database"),
  STATEMENT_INVALID("statement_invalid", "the sql-mode statement does not prepare on the target: fix sink.statement"),
  TRANSIENT("transient", "the target failed in a way that passes (connection lost, deadlock, serialization failure,"
      + " shutdown): retried with back-off; nothing is dead-lettered");

  final String code;
  final String fix;

  ErrorCode(String code, String fix) {
    this.code = code;
    this.fix = fix;
  }

  ConnectorException exception(String connector) {
    return new ConnectorException(code, "connector '" + connector + "': " + fix + " (" + code + ")");
  }
}
