package io.queen.pgconn.internal.source;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Holds a source's confirmations back until Queen's commit that recorded them is on the standbys that
 * {@code synchronized_standby_slots} names in Queen's database (PostgreSQL 17).
 *
 * <p>Only for a failover slot in Queen's own database ({@link #of}). Why: PostgreSQL synchronises a failover slot's position to a standby once the standby has the WAL up to that
 * position, but the source confirms a change only after Queen committed it, and that commit comes later in the WAL
 * than the change. A standby that had the change and not yet Queen's commit of it could get the slot's new position,
 * and after a failover to it the slot would be past a change the queue there does not hold: the source would stop
 * with {@code slot_ahead} and need a resync. With the gate the slot moves only as far as the standbys hold Queen's
 * pointer, so after a failover the slot is at or behind the pointer and the source goes on; what it reads again at
 * or below the pointer it drops, as after any restart. (When Queen's database is another server, a failover of it
 * under asynchronous replication can take the pointer back behind the slot: the source stops with
 * {@code slot_ahead}; the README advises synchronous replication for Queen's database then.)
 *
 * <p>Without the setting nothing is held (the standbys Queen's database has, if any, are not failover candidates the
 * operator named). A named slot that is missing, invalidated or behind holds every confirmation, as PostgreSQL itself
 * holds back a failover slot's changes then; the slot keeps its WAL meanwhile, and after {@link #WARN_AFTER_NANOS}
 * without progress one WARN says so (and an INFO when confirmations go on). Used by the stream's pusher thread only.
 */
final class StandbyGate {
  private static final Logger LOG = LoggerFactory.getLogger(StandbyGate.class);
  /** Confirmations held this long get a WARN (and their release an INFO). */
  static final long WARN_AFTER_NANOS = 60_000_000_000L;
  /** Commits held at most; past it the newest stands in for the one before (it releases later, never sooner). */
  private static final int MAX_HELD = 256;
  /** Nothing to confirm. */
  static final long NONE = -1;

  /** invalidation_reason is PostgreSQL 17's column: read through the row's jsonb, so the statement parses before 17. */
  private static final String LEVEL = "select (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::int8,"
      + " current_setting('synchronized_standby_slots', true),"
      + " (select (min(restart_lsn) - '0/0'::pg_lsn)::int8 from pg_replication_slots s"
      + "   where slot_type = 'physical' and slot_name = any(?) and to_jsonb(s) ->> 'invalidation_reason' is null),"
      + " (select count(*) from pg_replication_slots s"
      + "   where slot_type = 'physical' and slot_name = any(?) and restart_lsn is not null"
      + "   and to_jsonb(s) ->> 'invalidation_reason' is null)";

  private final DataSource queenDb;
  /** The slots waited for: the setting as last read (it is read with every level, so a change counts at once). */
  private String[] slots;
  private final String who;
  private final long warnAfterNanos;
  /** {flush to confirm, Queen's WAL position after the commit that recorded it}, both ascending. */
  private final ArrayDeque<long[]> held = new ArrayDeque<>();
  private long heldSince;
  private boolean warned;

  /**
   * A gate that waits for {@code slots} (the setting as {@link #of} read it; each level reads it again and follows
   * it) and WARNs once confirmations have been held {@code warnAfterNanos}; {@code who} prefixes its log lines.
   */
  StandbyGate(DataSource queenDb, List<String> slots, String who, long warnAfterNanos) {
    this.queenDb = queenDb;
    this.slots = slots.toArray(new String[0]);
    this.who = who;
    this.warnAfterNanos = warnAfterNanos;
  }

  /**
   * The gate for a source whose slot is {@code sourceSlot}, as {@code synchronized_standby_slots} is set in Queen's
   * database now; {@code null} (confirm at once) when the setting names no slot, or when Queen's database does not
   * hold that slot as a failover slot: the source's database is another one (a failover of the source's server
   * does not take Queen's pointer back, and Queen's standbys must not hold back the source server's WAL), or the
   * slot is not a failover slot (PostgreSQL holds back none of its changes, and a failover loses it anyway).
   */
  static StandbyGate of(DataSource queenDb, String sourceSlot, String who) throws SQLException {
    String setting;
    boolean failoverSlotHere;
    try (Connection c = queenDb.getConnection();
        PreparedStatement st = c.prepareStatement("select current_setting('synchronized_standby_slots', true),"
            + " exists (select 1 from pg_replication_slots s where slot_name = ?"
            + " and (to_jsonb(s) ->> 'failover')::boolean and database = current_database())")) {
      st.setString(1, sourceSlot);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        setting = rs.getString(1);
        failoverSlotHere = rs.getBoolean(2);
      }
    }
    List<String> slots = parse(setting);
    return slots.isEmpty() || !failoverSlotHere ? null : new StandbyGate(queenDb, slots, who, WARN_AFTER_NANOS);
  }

  /** The slot names of a {@code synchronized_standby_slots} value (a comma-separated list, names maybe quoted). */
  static List<String> parse(String setting) {
    List<String> out = new ArrayList<>();
    if (setting == null) {
      return out;
    }
    for (String part : setting.split(",")) {
      String name = part.trim();
      if (name.length() >= 2 && name.startsWith("\"") && name.endsWith("\"")) {
        name = name.substring(1, name.length() - 1).replace("\"\"", "\"");
      } else {
        name = name.toLowerCase(java.util.Locale.ROOT); // PostgreSQL folds an unquoted name to lower case
      }
      if (!name.isEmpty()) {
        out.add(name);
      }
    }
    return out;
  }

  /** The slots the gate waits for. */
  List<String> slots() {
    return List.of(slots);
  }

  /**
   * Queen has committed the pointer at {@code flush}: holds it until the standbys have that commit, and returns the
   * highest flush that may be confirmed now ({@link #NONE} when none).
   */
  long committed(long flush) throws SQLException {
    long[] level = level();
    if (held.isEmpty()) {
      heldSince = System.nanoTime();
    }
    if (held.size() >= MAX_HELD) {
      held.pollLast();
    }
    held.addLast(new long[] {flush, level[0]});
    return release(level[1]);
  }

  /** Whether a confirmation waits for the standbys. */
  boolean holding() {
    return !held.isEmpty();
  }

  /** Asks the standbys again; the highest flush that may be confirmed now, or {@link #NONE}. */
  long poll() throws SQLException {
    return held.isEmpty() ? NONE : release(level()[1]);
  }

  /**
   * {Queen's WAL position now, the lowest position every named standby has, or -1 while one lacks a slot}. The setting
   * is read in the same query: cleared (as after a promotion, when it named the old primary's standby), nothing is
   * held any more; changed, the new names count from this call on.
   */
  private long[] level() throws SQLException {
    try (Connection c = queenDb.getConnection(); PreparedStatement st = c.prepareStatement(LEVEL)) {
      for (int tries = 0; ; tries++) {
        java.sql.Array names = c.createArrayOf("text", slots);
        st.setArray(1, names);
        st.setArray(2, names);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          long now = rs.getLong(1);
          List<String> setting = parse(rs.getString(2));
          if (setting.isEmpty()) {
            return new long[] {now, Long.MAX_VALUE}; // no standby named any more: confirm what Queen holds
          }
          if (!setting.equals(List.of(slots)) && tries == 0) {
            LOG.info("{}: synchronized_standby_slots names {} now; confirmations wait for those", who,
                String.join(", ", setting));
            slots = setting.toArray(new String[0]);
            continue;
          }
          long min = rs.getLong(3);
          boolean all = !rs.wasNull() && rs.getLong(4) == slots.length;
          return new long[] {now, all ? min : -1};
        }
      }
    }
  }

  private long release(long standbys) {
    long ok = NONE;
    while (!held.isEmpty() && standbys >= 0 && Long.compareUnsigned(held.peekFirst()[1], standbys) <= 0) {
      ok = held.pollFirst()[0];
    }
    long now = System.nanoTime();
    if (ok != NONE) {
      if (warned) {
        warned = false;
        LOG.info("{}: the standby slot(s) {} of synchronized_standby_slots have Queen's commits again; confirming to"
            + " the replication slot again after about {} s", who, String.join(", ", slots),
            (now - heldSince) / 1_000_000_000L);
      }
      heldSince = now;
    } else if (!held.isEmpty() && !warned && now - heldSince > warnAfterNanos) {
      warned = true;
      LOG.warn("{}: the standby slot(s) {} of synchronized_standby_slots have not had Queen's commits for {} s (a"
          + " standby down, behind, or a slot missing or invalidated), so the source confirms nothing to its"
          + " replication slot meanwhile and the slot keeps its WAL: a failover to a standby without them would"
          + " otherwise leave the slot ahead of the source's pointer", who, String.join(", ", slots),
          (now - heldSince) / 1_000_000_000L);
    }
    return ok;
  }
}
