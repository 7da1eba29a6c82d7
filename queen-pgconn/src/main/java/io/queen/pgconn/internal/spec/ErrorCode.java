package io.queen.pgconn.internal.spec;

import io.queen.ConnectorException;

/** The closed set of connector error codes, each with the sentence that names the fix (README table). */
public enum ErrorCode {
  NO_ENCRYPTION_KEY("no_encryption_key", "the document carries a password but this node has no encryption key: set"
      + " QUEEN_ENCRYPTION_KEY (64 hex digits) or the builder's encryptionKey(...), the same on every node"),
  WRONG_ENCRYPTION_KEY("wrong_encryption_key", "the stored password was sealed with another key (the GCM tag does not"
      + " match): give this node the key the other nodes use, or put the document again with the password"),
  CONNECT_FAILED("connect_failed", "cannot reach the target database: check connection.host, port, sslMode and that"
      + " PostgreSQL accepts connections from this node; retried at every re-read"),
  LOGIN_FAILED("login_failed", "the database (the sink's target, the source's tables') refused the login: check"
      + " connection.user and password"),
  CONNECT_PRIVILEGE("connect_privilege", "the server refused connection.user the database in connection.database:"
      + " GRANT CONNECT ON DATABASE <database> TO <role>; retried at every re-read"),
  DATABASE_MISSING("database_missing", "the server has no database of the name in connection.database: create it or"
      + " fix the document; retried at every re-read"),
  TABLE_MISSING("table_missing", "the sink's table does not exist: create it (the sink never creates or alters it)"),
  NO_KEY("no_key", "modes upsert and cdc need a primary key or a unique index on the table: add one"),
  PRIVILEGES("privileges", "the sink's role lacks a privilege on the table: GRANT INSERT, UPDATE, DELETE (and"
      + " TRUNCATE for cdc with truncates) to it"),
  METADATA_COLUMN_MISSING("metadata_column_missing", "a column named in sink.metadata does not exist (or is generated):"
      + " add it or fix the document"),
  PROGRESS_TABLE("progress_table", "the sink's tables queen.sink_progress and queen.sink_dead_letters cannot be"
      + " created, read or written, or have another shape: create them as the README shows and grant the sink's role"
      + " USAGE on schema queen and SELECT, INSERT, UPDATE, DELETE on both, or let it create them (CREATE on the"
      + " database while schema queen does not exist there, USAGE and CREATE on schema queen once it does)"),
  QUEUE_MISSING("queue_missing", "the sink's queue does not exist yet: the sink runs and reads it from its first push;"
      + " if messages were expected, check sink.queue (the phase stays running; nothing is counted as an error)"),
  STATEMENT_INVALID("statement_invalid", "the sql-mode statement does not prepare on the target: fix sink.statement"),
  TRANSIENT("transient", "the target failed in a way that passes (connection lost, deadlock, serialization failure,"
      + " shutdown): retried with back-off; nothing is dead-lettered"),
  // ---- the source
  SERVER_VERSION("server_version", "the source needs PostgreSQL 17 or later (the sink works with any version)"),
  WAL_LEVEL("wal_level", "wal_level is not logical: set wal_level = logical and restart PostgreSQL"),
  NO_REPLICATION("no_replication", "the source's role lacks the REPLICATION attribute: ALTER ROLE <role> REPLICATION"
      + " (and LOGIN)"),
  SELECT_PRIVILEGE("select_privilege", "the source's role cannot read a source table: GRANT SELECT ON <table> TO"
      + " <role>"),
  SOURCE_TABLE_MISSING("table_missing", "a table in source.tables does not exist: create it or fix the document"),
  SOURCE_NO_KEY("no_key", "a source table has no key the source can read from the WAL: add a primary key, or a"
      + " unique index on NOT NULL columns and ALTER TABLE <table> REPLICA IDENTITY USING INDEX <index>; nothing was"
      + " published"),
  PARTITION_COLUMN("partition_column", "a column in a source table's partitionBy is not a column of that table: fix"
      + " the document"),
  PARTITION_IDENTITY("partition_identity", "a column in a source table's partitionBy is not in the table's replica"
      + " identity, so a delete (or an update that moves the row to another group) would not carry its old value and"
      + " would land in the wrong partition: ALTER TABLE <table> REPLICA IDENTITY FULL, or partition by key columns;"
      + " nothing was published"),
  NOT_OWNER("not_owner", "managePublication is true but the source's role does not own every source table: have the"
      + " owner CREATE PUBLICATION <publication> FOR TABLE ... and put managePublication: false with its name"),
  CREATE_PRIVILEGE("create_privilege", "managePublication is true and the publication does not exist yet, but the"
      + " source's role lacks CREATE on the database (CREATE PUBLICATION needs it): GRANT CREATE ON DATABASE <database>"
      + " TO <role>, or have the owner create the publication and put managePublication: false with its name"),
  PUBLICATION_FILTERED("publication_filtered", "the publication has a row filter or a column list on a source table"
      + " (the snapshot would not apply it): publish whole tables"),
  PUBLICATION_MISSING("publication_missing", "the publication does not publish inserts, updates and deletes, or"
      + " (managePublication false) does not exist or lacks a source table: have the table owner create or alter it"),
  PUBLICATION_VIA_ROOT("publication_via_root", "a source table is partitioned and the publication (managePublication"
      + " false) publishes its changes under its partitions' names, which the source does not read: ALTER PUBLICATION"
      + " <publication> SET (publish_via_partition_root = true)"),
  SLOT_LOST("slot_lost", "the replication slot is gone (dropped by hand, a failover without failover slots or before"
      + " the standby had synchronized the slot, a restore): changes may be missing; resync the source"
      + " (connectors().resync(name)) to start over"),
  SLOT_INVALIDATED("slot_invalidated", "PostgreSQL invalidated the replication slot (max_slot_wal_keep_size reached or"
      + " a recovery conflict): changes are missing; resync the source, which drops and recreates the slot"),
  SLOT_AHEAD("slot_ahead", "the replication slot's confirmed_flush_lsn is ahead of the source's pointer (someone"
      + " advanced or recreated the slot, or a failover to a standby that had the slot's position but not Queen's"
      + " commit: name the standby's slot in synchronized_standby_slots of Queen's database): changes may have been"
      + " skipped, so the source does not stream on; resync it"),
  REPLICATION_CONNECTION("replication_connection", "the source needs a URL and credentials for its replication"
      + " connection and Queen's DataSource does not tell them: give the source document a connection block"),
  STREAM_FAILED("stream_failed", "a change could not be made into a message or pushed, in a way that does not pass"
      + " (the reason names the table, column or limit, never a value), for example a row above maxPayloadBytes: the"
      + " source tries it again every ConnectorOptions.refresh and shows this until a bundle past it commits; remove"
      + " the cause (raise maxPayloadBytes on every node), or resync to start over"),
  SETUP_FAILED("setup_failed", "PostgreSQL refused a statement of the source's setup in a way that does not pass (its"
      + " SQLSTATE and message follow; often a privilege, such as altering a publication another role owns): fix what"
      + " it names; tried again at every re-read"),
  TABLES_CHANGED("tables_changed", "the source's tables were changed while its snapshot was copying them, in"
      + " front of the table it was at (one removed, or put before it): put that table back in its place to let the"
      + " snapshot go on, or resync to copy every table anew; tables added after it are fine"),
  SLOT_CREATION("slot_creation", "creating the replication slot failed (it waits for the transactions running at that"
      + " moment to end; check pg_stat_activity for long ones, and max_replication_slots); retried at every re-read");

  private final String code;
  private final String fix;

  ErrorCode(String code, String fix) {
    this.code = code;
    this.fix = fix;
  }

  /** The code as the status and the README show it. */
  public String code() {
    return code;
  }

  /** The sentence that names the fix. */
  public String fix() {
    return fix;
  }

  /**
   * The code of a connection refused for its login or its database, or null for any other failure: a wrong or
   * missing password (28P01, 28000, and pgjdbc's 08004 when the server asked for a password and none was given), a
   * database that does not exist (3D000), a role without CONNECT on the database (42501, told apart from a
   * privilege a statement lacks by {@link ConnectDenied}, which only the code that opens connections throws).
   *
   * @param passwordGiven whether the connection was opened with a password: pgjdbc's 08004 also stands for a server
   *     without SSL that the URL requires, and its message is translated to the JVM's language, so "no password" is
   *     told apart by the connection having none (the English text is a second hint)
   */
  public static ErrorCode ofLogin(java.sql.SQLException e, boolean passwordGiven) {
    String state = e.getSQLState();
    if ("28P01".equals(state) || "28000".equals(state) || ("08004".equals(state)
        && (!passwordGiven || e.getMessage() != null && e.getMessage().contains("password")))) {
      return LOGIN_FAILED;
    }
    if (e instanceof ConnectDenied) {
      return CONNECT_PRIVILEGE;
    }
    return "3D000".equals(state) ? DATABASE_MISSING : null;
  }

  /** The exception a connector's status and the API show for this code. */
  public ConnectorException exception(String connector) {
    return new ConnectorException(code, "connector '" + connector + "': " + fix + " (" + code + ")");
  }
}
