package io.queen.pgconn.internal.source;

import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * The source's setup on the normal connection, in the order that keeps mistakes harmless: the checks first
 * (server version, wal_level, REPLICATION, each table's existence, SELECT, key and partitionBy columns), then the
 * publication (created or checked: whole tables only, a partitioned table's changes under its own name), then the
 * slot. A table without a key is refused before the publication is touched: once published,
 * PostgreSQL would refuse the application's own updates and deletes on it. Identifiers are validated by the
 * document and always double-quoted here.
 */
final class SourceSetup {
  private SourceSetup() {}

  /** A failed check: the code and what was found (table names, never values). */
  static final class Failed extends Exception {
    private static final long serialVersionUID = 1L;
    final ErrorCode code;

    Failed(ErrorCode code, String what) {
      super(what, null, false, false);
      this.code = code;
    }
  }

  /** What {@code pg_replication_slots} says of the slot. */
  record Slot(boolean exists, String confirmedFlushLsn, String walStatus, String invalidationReason, Integer activePid,
      String plugin, boolean otherDatabase, boolean failover) {
    static final Slot NONE = new Slot(false, null, null, null, null, null, false, false);

    boolean invalidated() {
      return "lost".equals(walStatus) || invalidationReason != null;
    }
  }

  static void check(Connection c, SourceSpec spec) throws SQLException, Failed {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("select current_setting('server_version_num')"
        + "::int, current_setting('wal_level'), (select rolreplication or rolsuper from pg_roles where rolname ="
        + " current_user), current_user")) {
      rs.next();
      server(rs.getInt(1), rs.getString(2), rs.getBoolean(3), rs.getString(4));
    }
    for (SourceSpec.Table t : spec.tables()) {
      try (PreparedStatement st = c.prepareStatement("select c.oid, has_table_privilege(c.oid, 'SELECT'), c.relreplident,"
          + " exists (select 1 from pg_index i where i.indrelid = c.oid and i.indisprimary),"
          + " exists (select 1 from pg_index i where i.indrelid = c.oid and i.indisreplident)"
          + " from pg_class c join pg_namespace n on n.oid = c.relnamespace"
          + " where n.nspname = ? and c.relname = ? and c.relkind in ('r', 'p')")) {
        st.setString(1, t.schema());
        st.setString(2, t.table());
        try (ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            throw new Failed(ErrorCode.SOURCE_TABLE_MISSING, "table " + t.qualifiedName());
          }
          if (!rs.getBoolean(2)) {
            throw new Failed(ErrorCode.SELECT_PRIVILEGE, "table " + t.qualifiedName());
          }
          String identity = rs.getString(3);
          boolean pk = rs.getBoolean(4);
          boolean index = rs.getBoolean(5);
          boolean keyed = switch (identity) {
            case "d", "f" -> pk;
            case "i" -> index;
            default -> false;
          };
          if (!keyed) {
            throw new Failed(ErrorCode.SOURCE_NO_KEY, "table " + t.qualifiedName() + " (replica identity "
                + identityName(identity) + ", " + (pk ? "" : "no ") + "primary key)");
          }
          if (!t.single() && !t.partitionBy().isEmpty()) {
            partitionColumns(c, t, rs.getLong(1));
          }
        }
      }
    }
  }

  /**
   * Each {@code partitionBy} column exists and is in the table's replica identity (FULL covers every column; the
   * default, the primary key's; USING INDEX, the index's), in every partition of a partitioned table (each writes
   * its own WAL with its own identity). A delete carries only the identity's old values, and an update carries the
   * old row only when an identity column changed: a partition column outside it would put a row's delete in
   * partition {@code \N} and keep a row that moved to another group in its old partition.
   */
  private static void partitionColumns(Connection c, SourceSpec.Table t, long oid) throws SQLException, Failed {
    java.util.Map<String, Boolean> covered = new java.util.HashMap<>();
    try (PreparedStatement st = c.prepareStatement("select a.attname, bool_and(case cl.relreplident when 'f' then true"
        + " when 'd' then exists (select 1 from pg_index i where i.indrelid = cl.oid and i.indisprimary"
        + " and a.attnum = any(i.indkey))"
        + " when 'i' then exists (select 1 from pg_index i where i.indrelid = cl.oid and i.indisreplident"
        + " and a.attnum = any(i.indkey)) else false end)"
        + " from (select ?::oid as relid union select tr.relid from pg_partition_tree(?::oid::regclass) tr"
        + " where tr.isleaf) tr join pg_class cl on cl.oid = tr.relid and cl.relkind = 'r'"
        + " join pg_attribute a on a.attrelid = cl.oid"
        + " where a.attnum > 0 and not a.attisdropped group by a.attname")) {
      st.setLong(1, oid);
      st.setLong(2, oid);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          covered.put(rs.getString(1), rs.getBoolean(2));
        }
      }
    }
    for (String column : t.partitionBy()) {
      Boolean in = covered.get(column);
      if (in == null) {
        throw new Failed(ErrorCode.PARTITION_COLUMN, "table " + t.qualifiedName() + ", partitionBy column " + column);
      }
      if (!in) {
        throw new Failed(ErrorCode.PARTITION_IDENTITY, "table " + t.qualifiedName() + ", partitionBy column " + column);
      }
    }
  }

  /**
   * The server-wide checks, in order: version, {@code wal_level} (a server setting, the same for every database),
   * the role's REPLICATION attribute (or superuser).
   */
  static void server(int versionNum, String walLevel, boolean replication, String role) throws Failed {
    if (versionNum < 170000) {
      throw new Failed(ErrorCode.SERVER_VERSION, "server_version_num " + versionNum);
    }
    if (!"logical".equals(walLevel)) {
      throw new Failed(ErrorCode.WAL_LEVEL, "wal_level is " + walLevel);
    }
    if (!replication) {
      throw new Failed(ErrorCode.NO_REPLICATION, "role " + role + " has no REPLICATION attribute: ALTER ROLE "
          + Ident.written(role) + " REPLICATION");
    }
  }

  /** Creates the publication (managed) or checks it; refuses row filters and column lists either way. */
  static void publication(Connection c, SourceSpec spec) throws SQLException, Failed {
    String pub = spec.publication();
    boolean exists;
    try (PreparedStatement st = c.prepareStatement("select pubinsert and pubupdate and pubdelete from pg_publication"
        + " where pubname = ?")) {
      st.setString(1, pub);
      try (ResultSet rs = st.executeQuery()) {
        exists = rs.next();
        if (exists && !rs.getBoolean(1)) {
          throw new Failed(ErrorCode.PUBLICATION_MISSING, "publication " + pub
              + " does not publish inserts, updates and deletes");
        }
      }
    }
    if (!exists && !spec.managePublication()) {
      throw new Failed(ErrorCode.PUBLICATION_MISSING, "publication " + pub + " does not exist");
    }
    String partitioned = partitioned(c, spec);
    if (spec.managePublication()) {
      for (SourceSpec.Table t : spec.tables()) {
        try (PreparedStatement st = c.prepareStatement("select pg_has_role(current_user, c.relowner, 'USAGE')"
            + " from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = ? and c.relname = ?")) {
          st.setString(1, t.schema());
          st.setString(2, t.table());
          try (ResultSet rs = st.executeQuery()) {
            if (!rs.next() || !rs.getBoolean(1)) {
              throw new Failed(ErrorCode.NOT_OWNER, "table " + t.qualifiedName());
            }
          }
        }
      }
      if (exists && partitioned != null && !viaRoot(c, pub)) {
        // before the look-up below: without it the publication lists a partitioned table's partitions, not the table
        try (Statement st = c.createStatement()) {
          st.execute("alter publication " + Ident.quote(pub) + " set (publish_via_partition_root = true)");
        }
      }
      List<SourceSpec.Table> missing = missing(c, spec);
      if (!exists) {
        try (Statement st = c.createStatement();
            ResultSet rs = st.executeQuery("select has_database_privilege(current_database(), 'CREATE')")) {
          rs.next();
          if (!rs.getBoolean(1)) {
            throw new Failed(ErrorCode.CREATE_PRIVILEGE, "publication " + pub);
          }
        }
        StringBuilder sql = new StringBuilder("create publication " + Ident.quote(pub) + " for table ");
        for (int i = 0; i < spec.tables().size(); i++) {
          sql.append(i == 0 ? "" : ", ").append(spec.tables().get(i).sql());
        }
        // a partitioned table's changes are published under its own name, as the snapshot reads it
        sql.append(" with (publish = 'insert, update, delete, truncate', publish_via_partition_root = true)");
        // marked as the source's in the same implicit transaction: deleting the source drops only what it created
        sql.append("; comment on publication ").append(Ident.quote(pub)).append(" is '").append(mark(spec.name()))
            .append('\'');
        try (Statement st = c.createStatement()) {
          st.execute(sql.toString());
        } catch (SQLException e) {
          if (!"42710".equals(e.getSQLState())) { // created meanwhile by another node: checked below
            throw e;
          }
        }
      } else if (!missing.isEmpty()) {
        for (SourceSpec.Table t : missing) {
          try (Statement st = c.createStatement()) {
            st.execute("alter publication " + Ident.quote(pub) + " add table " + t.sql());
          } catch (SQLException e) {
            if (!"42710".equals(e.getSQLState())) { // added meanwhile by a put
              throw e;
            }
          }
        }
      }
    }
    if (!spec.managePublication() && partitioned != null && !viaRoot(c, pub)) {
      throw new Failed(ErrorCode.PUBLICATION_VIA_ROOT, "publication " + pub + ", table " + partitioned);
    }
    List<SourceSpec.Table> missing = missing(c, spec);
    if (!missing.isEmpty()) {
      throw new Failed(ErrorCode.PUBLICATION_MISSING, "publication " + pub + " lacks " + missing.get(0).qualifiedName());
    }
    try (PreparedStatement st = c.prepareStatement("select n.nspname, c.relname from pg_publication p"
        + " join pg_publication_rel r on r.prpubid = p.oid join pg_class c on c.oid = r.prrelid"
        + " join pg_namespace n on n.oid = c.relnamespace"
        + " where p.pubname = ? and (r.prqual is not null or r.prattrs is not null)")) {
      st.setString(1, pub);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          if (spec.table(rs.getString(1), rs.getString(2)) != null) {
            throw new Failed(ErrorCode.PUBLICATION_FILTERED, "publication " + pub + ", table " + rs.getString(1) + "."
                + rs.getString(2));
          }
        }
      }
    }
  }

  /** The first source table that is partitioned, or null. */
  private static String partitioned(Connection c, SourceSpec spec) throws SQLException {
    for (SourceSpec.Table t : spec.tables()) {
      try (PreparedStatement st = c.prepareStatement("select c.relkind = 'p' from pg_class c"
          + " join pg_namespace n on n.oid = c.relnamespace where n.nspname = ? and c.relname = ?")) {
        st.setString(1, t.schema());
        st.setString(2, t.table());
        try (ResultSet rs = st.executeQuery()) {
          if (rs.next() && rs.getBoolean(1)) {
            return t.qualifiedName();
          }
        }
      }
    }
    return null;
  }

  private static boolean viaRoot(Connection c, String pub) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select pubviaroot from pg_publication where pubname = ?")) {
      st.setString(1, pub);
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() && rs.getBoolean(1);
      }
    }
  }

  /** The source tables the publication does not publish (whole-database publications publish all). */
  /**
   * At a put: adds the document's tables that its existing publication lacks, so that their changes from the put on
   * are published. The owner adds them as well when it runs the new document, but a change made before that would
   * not be in the publication and never reach the stream (the decoder reads the publication as it was at each
   * change). Nothing is done for a publication the source does not manage or that does not exist yet (nothing
   * streams from it). Returns null when done, or why not, for a log line: the owner's setup then reports the cause.
   */
  static String publishAddedTables(SourceSpec spec, String password, javax.sql.DataSource queens) {
    if (!spec.managePublication()) {
      return null;
    }
    SourceConnections conns;
    try {
      conns = SourceConnections.of(spec, password, queens);
    } catch (SourceConnections.Unavailable u) {
      return u.getMessage();
    }
    try (Connection c = conns.normal(new DecoderCodec())) {
      try (PreparedStatement st = c.prepareStatement("select 1 from pg_publication where pubname = ?")) {
        st.setString(1, spec.publication());
        try (ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            return null;
          }
        }
      }
      // the owner's checks first: a table without a key the WAL carries, published, would make the application's
      // updates and deletes of it fail; a partitioned one needs the publication's via-root setting, the owner's step
      check(c, spec);
      if (partitioned(c, spec) != null) {
        return "a partitioned table is added by the owner's setup";
      }
      try (Statement st = c.createStatement()) {
        st.execute("set lock_timeout = '5s'"); // a VACUUM or an index build on the table does not hold the put up
      }
      for (SourceSpec.Table t : missing(c, spec)) {
        try (Statement st = c.createStatement()) {
          st.execute("alter publication " + Ident.quote(spec.publication()) + " add table " + t.sql());
        } catch (SQLException e) {
          if (!"42710".equals(e.getSQLState())) { // added meanwhile by the owner's setup
            throw e;
          }
        }
      }
      return null;
    } catch (Failed f) {
      return f.code.code() + ", which its owner reports";
    } catch (SQLException e) {
      return "PostgreSQL refused it (SQLSTATE " + e.getSQLState() + ")";
    }
  }

  private static List<SourceSpec.Table> missing(Connection c, SourceSpec spec) throws SQLException {
    List<SourceSpec.Table> out = new ArrayList<>();
    for (SourceSpec.Table t : spec.tables()) {
      try (PreparedStatement st = c.prepareStatement("select 1 from pg_publication_tables where pubname = ? and"
          + " schemaname = ? and tablename = ?")) {
        st.setString(1, spec.publication());
        st.setString(2, t.schema());
        st.setString(3, t.table());
        try (ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            out.add(t);
          }
        }
      }
    }
    return out;
  }

  static Slot slot(Connection c, String slot) throws SQLException {
    // invalidation_reason and failover are PostgreSQL 17's columns: read through the row's jsonb, null before 17
    try (PreparedStatement st = c.prepareStatement("select confirmed_flush_lsn::text, wal_status,"
        + " to_jsonb(s) ->> 'invalidation_reason', active_pid, plugin, database is distinct from current_database(),"
        + " coalesce((to_jsonb(s) ->> 'failover')::boolean, false) from pg_replication_slots s where slot_name = ?")) {
      st.setString(1, slot);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          return Slot.NONE;
        }
        int pid = rs.getInt(4);
        return new Slot(true, rs.getString(1), rs.getString(2), rs.getString(3), rs.wasNull() ? null : pid,
            rs.getString(5), rs.getBoolean(6), rs.getBoolean(7));
      }
    }
  }

  /**
   * Whether the server streams to a physical standby now (then the slot is created as a failover slot). A physical
   * walsender is one without a database: a logical one, this source's own replication connection included (it shows
   * in {@code pg_stat_replication} before it has a slot), has one.
   */
  static boolean hasStandbys(Connection c) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("select exists (select 1 from"
        + " pg_stat_replication r join pg_stat_activity a on a.pid = r.pid where a.datid is null)")) {
      rs.next();
      return rs.getBoolean(1);
    }
  }

  /**
   * Creates the slot on the replication connection (the raw walsender command, so it can be a failover slot).
   * Waits for the transactions running now to end. Returns the consistent point (text LSN).
   */
  static String createSlot(Connection replication, String slot, boolean failover) throws SQLException {
    try (Statement st = replication.createStatement(); ResultSet rs = st.executeQuery("CREATE_REPLICATION_SLOT "
        + Ident.quote(slot) + " LOGICAL pgoutput (" + (failover ? "FAILOVER true, " : "") + "SNAPSHOT 'nothing')")) {
      rs.next();
      return rs.getString("consistent_point");
    }
  }

  /**
   * Makes an existing slot a failover slot (PostgreSQL 17's {@code ALTER_REPLICATION_SLOT}), for a slot created before
   * the server had a standby: without it a failover loses the slot and the source needs a resync.
   */
  static void makeFailover(Connection replication, String slot) throws SQLException {
    try (Statement st = replication.createStatement()) {
      st.execute("ALTER_REPLICATION_SLOT " + Ident.quote(slot) + " (FAILOVER true)");
    }
  }

  /**
   * The slots {@code synchronized_standby_slots} names that no standby streams from now, each with why ("missing",
   * "invalidated", "inactive"). PostgreSQL holds back every failover slot's changes until each named slot's standby
   * has confirmed them; a promoted standby keeps its old primary's setting, which names the standby's own slot there.
   */
  static List<String> idleStandbySlots(Connection c) throws SQLException {
    List<String> idle = new ArrayList<>();
    String setting;
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select current_setting('synchronized_standby_slots', true)")) {
      rs.next();
      setting = rs.getString(1);
    }
    List<String> names = StandbyGate.parse(setting);
    if (names.isEmpty()) {
      return idle;
    }
    try (PreparedStatement st = c.prepareStatement("select n, case when s.slot_name is null then 'missing'"
        + " when to_jsonb(s) ->> 'invalidation_reason' is not null then 'invalidated' else 'inactive' end"
        + " from unnest(?::text[]) n left join pg_replication_slots s on s.slot_name = n and s.slot_type = 'physical'"
        + " where s.slot_name is null or to_jsonb(s) ->> 'invalidation_reason' is not null or s.active_pid is null")) {
      st.setArray(1, c.createArrayOf("text", names.toArray()));
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          idle.add(rs.getString(1) + " (" + rs.getString(2) + ")");
        }
      }
    }
    return idle;
  }

  /** Drops the slot when it exists and nobody streams from it; true when it is gone now. */
  static boolean dropSlot(Connection c, String slot) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select pg_drop_replication_slot(slot_name) from pg_replication_slots"
        + " where slot_name = ? and not active")) {
      st.setString(1, slot);
      st.executeQuery().close();
    }
    return !slot(c, slot).exists();
  }

  /** The comment a source puts on the publication it creates (source names are {@code [a-z0-9][a-z0-9_-]*}). */
  static String mark(String source) {
    if (!source.matches("[a-z0-9][a-z0-9_-]{0,47}")) {
      throw new IllegalArgumentException("source name not allowed");
    }
    return "created by Queen source " + source;
  }

  /** Whether {@code publication} carries the mark of {@code source}: it created it, so deleting it drops it. */
  static boolean createdBy(Connection c, String publication, String source) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select obj_description(oid, 'pg_publication') = ?"
        + " from pg_publication where pubname = ?")) {
      st.setString(1, mark(source));
      st.setString(2, publication);
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() && rs.getBoolean(1);
      }
    }
  }

  static boolean publicationExists(Connection c, String publication) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select 1 from pg_publication where pubname = ?")) {
      st.setString(1, publication);
      try (ResultSet rs = st.executeQuery()) {
        return rs.next();
      }
    }
  }

  static void dropPublication(Connection c, String publication) throws SQLException {
    try (Statement st = c.createStatement()) {
      st.execute("drop publication if exists " + Ident.quote(publication));
    }
  }

  /**
   * A column's value as its type's output function prints it (NULL stays NULL), which is what pgoutput sends in a
   * change: {@code format('%s', v)} calls the output function, where {@code v::text} would take the cast some types
   * have to text instead (boolean {@code true} for {@code t}, {@code char(n)} without its trailing blanks, inet with
   * its {@code /32}). So a snapshot row, a stream change and a value read back print the same, and a key names the
   * same partition whichever way its row arrived.
   */
  static String printed(String columnRef) {
    return "CASE WHEN " + columnRef + " IS NULL THEN NULL ELSE format('%s', " + columnRef + ") END";
  }

  /** A table's replica identity as ALTER TABLE ... REPLICA IDENTITY names it ({@code pg_class.relreplident}). */
  static String identityName(String relreplident) {
    return switch (relreplident) {
      case "d" -> "default";
      case "f" -> "full";
      case "i" -> "using index";
      case "n" -> "nothing";
      default -> relreplident;
    };
  }
}
