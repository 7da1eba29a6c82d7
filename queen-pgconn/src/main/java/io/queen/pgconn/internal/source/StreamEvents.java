package io.queen.pgconn.internal.source;

import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The stream's events of its decoded changes, on the committer thread (not thread-safe): the document's table of each
 * change (by name, or by relation id for a table renamed while the source streams), its key resolved, the events
 * built by the same rules as the snapshot's ({@link Codec}), a key change that moves a row to another partition as a
 * delete and a create whose unchanged TOASTed values are read back from the table, and each change told to the
 * snapshot ({@link SnapshotHook#onChange}) while it copies.
 */
final class StreamEvents {
  /** Logs under Stream's logger, the one an operator knows and configures for all of it. */
  private static final Logger LOG = LoggerFactory.getLogger(Stream.class);

  /** Where a change stands: its transaction's commit LSN, xid and commit time, and the source's epoch. */
  record Commit(long lsn, long xid, long micros, String epoch) {}

  /** A change of a table the document does not name, with a newer document stored: the stream stops before it. */
  static final class DocumentChanged extends RuntimeException {
    DocumentChanged() {
      super("a newer document is stored", null, false, false);
    }
  }

  private final SourceSpec spec;
  private final Codec codec;
  private final Connection normal;
  private final SnapshotHook hook;
  /** Whether this document is still the stored one; throws when Queen's database cannot tell now. */
  private final BooleanSupplier stored;
  private final String node;
  private final BooleanSupplier stopping;
  /** Relations as the stream sent them, to the same with their types resolved and their row key flagged. */
  private final Map<PgMessage.Relation, PgMessage.Relation> keyed = new IdentityHashMap<>();
  /**
   * The document's tables by relation id, read at the start. The publication holds tables, not names: a table renamed
   * while the source streams is logged under its new name, and a transaction of before a rename that a source put
   * with the new name reads again under the old one. Either way the change is the table's, by its id.
   */
  private Map<Integer, SourceSpec.Table> byOid = Map.of();
  /** Relation ids whose other name was logged (once each). */
  private final Set<Integer> renamedSaid = new HashSet<>();
  /**
   * Whether the bundle being built has checked that this document is still the stored one (it does once, at its
   * first change of a table the document does not name). Asked per bundle, never remembered across bundles: a put
   * that adds a table the publication already holds changes nothing the stream would see.
   */
  private boolean checkedThisBundle;

  StreamEvents(SourceSpec spec, Codec codec, Connection normal, SnapshotHook hook, BooleanSupplier stored, String node,
      BooleanSupplier stopping) {
    this.spec = spec;
    this.codec = codec;
    this.normal = normal;
    this.hook = hook;
    this.stored = stored;
    this.node = node;
    this.stopping = stopping;
  }

  /** Reads the document's tables' relation ids (at the stream's start). */
  void load() throws SQLException {
    byOid = tableIds(normal, spec);
  }

  /** A new bundle: whether the document is still the stored one is asked again. */
  void newBundle() {
    checkedThisBundle = false;
  }

  /** The document's tables by their relation ids, as named now (a table not found is left out). */
  private static Map<Integer, SourceSpec.Table> tableIds(Connection c, SourceSpec spec) throws SQLException {
    Map<Integer, SourceSpec.Table> ids = new HashMap<>();
    try (PreparedStatement st = c.prepareStatement("select c.oid::int8 from pg_class c"
        + " join pg_namespace n on n.oid = c.relnamespace where n.nspname = ? and c.relname = ?")) {
      for (SourceSpec.Table t : spec.tables()) {
        st.setString(1, t.schema());
        st.setString(2, t.table());
        try (ResultSet rs = st.executeQuery()) {
          if (rs.next()) {
            ids.put((int) rs.getLong(1), t); // a uint32 as the decoder reads it
          }
        }
      }
    }
    return ids;
  }

  /**
   * The events of one decoded change ({@code message}, of relation {@code raw} as last sent) at {@code ordinal} of
   * the transaction {@code at}, added to {@code out}; none for a table the document does not name.
   *
   * @throws DocumentChanged when such a table's change arrives and a newer document is stored
   */
  void add(PgMessage.Relation raw, PgMessage message, Commit at, int ordinal, List<SourceEvent> out)
      throws SQLException {
    if (raw == null) {
      throw new IllegalStateException("a change arrived before its relation");
    }
    PgMessage.Relation rel = raw;
    SourceSpec.Table table = spec.table(rel.schema(), rel.name());
    if (table == null) {
      table = byOid.get(raw.oid());
      if (table == null) {
        // published by a shared publication, not a source table; or a table a newer document adds: its changes
        // must not be passed over, so the stream stops here and the new document's instance streams them
        if (!checkedThisBundle) {
          if (!stored.getAsBoolean()) {
            throw new DocumentChanged();
          }
          checkedThisBundle = true;
        }
        return;
      }
      if (renamedSaid.add(raw.oid())) {
        LOG.warn("{} - source '{}': table {} is logged as {}.{} (renamed); its changes go on to queue '{}'. Put the"
            + " source with the table's new name: a restart under the old one stops with table_missing", node,
            spec.name(), table.qualifiedName(), rel.schema(), rel.name(), table.queue());
      }
    }
    rel = keyed.get(raw);
    if (rel == null) {
      rel = codec.resolve(normal, raw);
      keyed.put(raw, rel);
    }
    String epoch = at.epoch();
    long lsn = at.lsn();
    if (message instanceof PgMessage.Insert i) {
      emit(out, table, rel, i.after(), "c", null, i.after(), at, ordinal, codec.changeId(epoch, lsn, ordinal));
    } else if (message instanceof PgMessage.Delete d) {
      emit(out, table, rel, d.before(), "d", d.before(), null, at, ordinal, codec.changeId(epoch, lsn, ordinal));
    } else if (message instanceof PgMessage.Update u) {
      // an unchanged TOASTed value is not in the new tuple; it is the old one's when the update carries that
      PgMessage.Tuple now = unchangedFrom(u.after(), u.before());
      String newPartition = codec.partition(rel, now, table);
      String oldPartition = u.before() == null ? newPartition : codec.partition(rel, u.before(), table);
      if (!oldPartition.equals(newPartition)) {
        emit(out, table, rel, u.before(), "d", u.before(), null, at, ordinal, codec.changeId(epoch, lsn, ordinal));
        PgMessage.Tuple full = readBack(rel, table, u.after(), at.xid());
        emit(out, table, rel, full, "c", null, full, at, ordinal, codec.changeSecondId(epoch, lsn, ordinal));
      } else {
        emit(out, table, rel, now, "u", u.before(), now, at, ordinal, codec.changeId(epoch, lsn, ordinal));
      }
    }
  }

  /**
   * {@code after} with its unchanged TOASTed values ({@code 'u'}) taken from {@code before} where that has them as
   * text: an update under replica identity full logs the whole old row, TOASTed values inlined; an old key tuple
   * (default identity, a key change) has only the key's values, its other columns null, which are not taken.
   */
  private static PgMessage.Tuple unchangedFrom(PgMessage.Tuple after, PgMessage.Tuple before) {
    if (before == null) {
      return after;
    }
    char[] kinds = null;
    String[] texts = null;
    for (int i = 0; i < after.size() && i < before.size(); i++) {
      if (after.kinds()[i] == 'u' && before.kinds()[i] == 't') {
        if (kinds == null) {
          kinds = after.kinds().clone();
          texts = after.texts().clone();
        }
        kinds[i] = before.kinds()[i];
        texts[i] = before.texts()[i];
      }
    }
    return kinds == null ? after : new PgMessage.Tuple(kinds, texts);
  }

  private void emit(List<SourceEvent> out, SourceSpec.Table table, PgMessage.Relation rel, PgMessage.Tuple row,
      String op, PgMessage.Tuple before, PgMessage.Tuple after, Commit at, int ordinal, String id) {
    SourceEvent e = new SourceEvent(table.queue(), codec.partition(rel, row, table), id, codec.event(op, rel, before,
        after, at.lsn(), at.xid(), at.micros(), ordinal));
    if (hook != null) {
      // the snapshot knows its tables by the document's names: a table renamed while it copies is still that table
      PgMessage.Relation named = rel.schema().equals(table.schema()) && rel.name().equals(table.table()) ? rel
          : new PgMessage.Relation(rel.oid(), table.schema(), table.table(), rel.replicaIdentity(), rel.columns());
      hook.onChange(named, row, at.xid(), e);
      if ("u".equals(op) && before != null) {
        hook.onChange(named, before, at.xid(), e); // a key change within one partition: the old key too
      }
    }
    out.add(e);
  }

  /**
   * A key change's new row with its unchanged TOASTed values read back from the table (they are not in the WAL).
   * The value read can be newer than the change; the next event corrects it.
   */
  private PgMessage.Tuple readBack(PgMessage.Relation rel, SourceSpec.Table table, PgMessage.Tuple after, long xid)
      throws SQLException {
    List<Integer> missing = new ArrayList<>();
    for (int i = 0; i < after.size(); i++) {
      if (after.kinds()[i] == 'u') {
        missing.add(i);
      }
    }
    if (missing.isEmpty()) {
      return after;
    }
    // a row not found once the change is visible was moved or deleted since: a later event of this key says so
    awaitVisible(xid, table);
    StringBuilder sql = new StringBuilder("select ");
    for (int j = 0; j < missing.size(); j++) {
      String column = Ident.quoteCatalogName(rel.columns().get(missing.get(j)).name());
      sql.append(j == 0 ? "" : ", ").append(SourceSetup.printed(column));
    }
    sql.append(" from ").append(currentName(rel, table)).append(" where ");
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < rel.columns().size(); i++) {
      if (rel.columns().get(i).key()) {
        String column = Ident.quoteCatalogName(rel.columns().get(i).name());
        sql.append(keys.isEmpty() ? "" : " and ").append(column).append(" = ?");
        keys.add(after.texts()[i]);
      }
    }
    char[] kinds = after.kinds().clone();
    String[] texts = after.texts().clone();
    try (PreparedStatement st = normal.prepareStatement(sql.toString())) {
      for (int k = 0; k < keys.size(); k++) {
        st.setObject(k + 1, keys.get(k), Types.OTHER);
      }
      try (ResultSet rs = st.executeQuery()) {
        if (rs.next()) {
          for (int j = 0; j < missing.size(); j++) {
            String v = rs.getString(j + 1);
            kinds[missing.get(j)] = v == null ? 'n' : 't';
            texts[missing.get(j)] = v;
          }
        }
      }
    }
    return new PgMessage.Tuple(kinds, texts);
  }

  /** How long a key change's read-back waits for its transaction to become visible before the stream stops. */
  static final long VISIBLE_WAIT_MS = 30_000;

  /**
   * Waits until transaction {@code xid} (its 32 bits, as pgoutput sends them) is visible to a new snapshot. Its commit
   * record is flushed, so decoded and sent, a moment before the transaction leaves the running set, and under
   * synchronous replication only once a standby answers: a read-back in between does not see the moved row, and
   * the unchanged TOASTed values it was to fill in would be missing for good. Past {@link #VISIBLE_WAIT_MS} the
   * stream stops at the change (nothing after it is pushed) and tries it again.
   */
  private void awaitVisible(long xid, SourceSpec.Table table) throws SQLException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(VISIBLE_WAIT_MS);
    long pause = 1;
    while (true) {
      String snapshot;
      try (Statement st = normal.createStatement(); ResultSet rs = st.executeQuery("select pg_current_snapshot()::text")) {
        rs.next();
        snapshot = rs.getString(1);
      }
      if (visible(snapshot, xid)) {
        return;
      }
      if (stopping.getAsBoolean() || System.nanoTime() - deadline > 0) {
        throw new IllegalStateException("a key change of " + table.qualifiedName() + " (transaction " + xid + ") is"
            + " committed but not visible after " + VISIBLE_WAIT_MS / 1000 + " s, so its moved row cannot be read"
            + " back (a synchronous standby not answering?); the stream stops before it and tries again");
      }
      try {
        Thread.sleep(pause);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("stopping");
      }
      pause = Math.min(100, pause * 2);
    }
  }

  /**
   * Whether the committed transaction {@code xid} (32 bits) is visible in {@code snapshot}
   * ({@code pg_current_snapshot()} as text, {@code xmin:xmax:xip,...}): its full id is the one with those low bits
   * nearest {@code xmax} (an assigned id is within 2^31 of it); visible when below {@code xmin}, or below
   * {@code xmax} and not among the running ones. At or above {@code xmax} it is still running: the newest running
   * transaction is not listed, {@code xmax} is one past the latest that completed.
   */
  static boolean visible(String snapshot, long xid) {
    String[] parts = snapshot.split(":", -1);
    long xmin = Long.parseLong(parts[0]);
    long xmax = Long.parseLong(parts[1]);
    long full = (xmax & ~0xFFFF_FFFFL) | (xid & 0xFFFF_FFFFL);
    if (full > xmax + (1L << 31)) {
      full -= 1L << 32;
    } else if (full < xmax - (1L << 31)) {
      full += 1L << 32;
    }
    if (full >= xmax) {
      return false;
    }
    if (full < xmin) {
      return true;
    }
    if (parts.length > 2 && !parts[2].isEmpty()) {
      for (String running : parts[2].split(",")) {
        if (Long.parseLong(running) == full) {
          return false;
        }
      }
    }
    return true;
  }

  /**
   * The table's name now, quoted, for a read-back: its relation id's, so a table renamed while the source streams
   * (or a change from before a rename, read again under the new name) is read where it is.
   */
  private String currentName(PgMessage.Relation rel, SourceSpec.Table table) throws SQLException {
    try (PreparedStatement st = normal.prepareStatement("select quote_ident(n.nspname) || '.' || quote_ident(c.relname)"
        + " from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = ?::bigint::oid")) {
      st.setLong(1, Integer.toUnsignedLong(rel.oid()));
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() ? rs.getString(1) : table.sql();
      }
    }
  }
}
