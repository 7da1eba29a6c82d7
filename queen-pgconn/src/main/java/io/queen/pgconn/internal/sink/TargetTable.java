package io.queen.pgconn.internal.sink;

import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.SinkSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * What the sink learned about its table at start: the columns it may write (not generated, not dropped, in
 * table order) and the key (the primary key, else the first unique index without predicate or expression).
 * The table is only read: never created or altered.
 */
record TargetTable(List<String> writable, Set<String> generated, List<String> key, boolean deferrable) {

  /** Checks the table for {@code spec}; a failed check is a {@link CheckFailed} with its code. */
  static TargetTable check(Connection c, SinkSpec spec) throws SQLException {
    String qualified = spec.qualifiedTable();
    Long oid = null;
    try (PreparedStatement st = c.prepareStatement("select to_regclass(?)::oid")) {
      st.setString(1, qualified);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        long v = rs.getLong(1);
        oid = rs.wasNull() ? null : v;
      }
    }
    if (oid == null) {
      throw new CheckFailed(ErrorCode.TABLE_MISSING, "table " + spec.tableSchema() + "." + spec.table());
    }
    Set<String> writable = new LinkedHashSet<>();
    Set<String> generated = new LinkedHashSet<>();
    try (PreparedStatement st = c.prepareStatement("select attname, attgenerated <> '' or attidentity = 'a' from"
        + " pg_attribute where attrelid = ? and attnum > 0 and not attisdropped order by attnum")) {
      st.setLong(1, oid);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          (rs.getBoolean(2) ? generated : writable).add(rs.getString(1));
        }
      }
    }
    List<String> key = List.of();
    try (PreparedStatement st = c.prepareStatement("select array_agg(a.attname::text order by k.ord) from pg_index i"
        + " cross join lateral unnest(i.indkey) with ordinality k(attnum, ord)"
        + " join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum"
        + " where i.indrelid = ? and i.indisunique and i.indpred is null and i.indexprs is null"
        // the key columns only (not an INCLUDE list), of an index ON CONFLICT can use: valid and not deferrable
        + " and i.indisvalid and i.indimmediate and k.ord <= i.indnkeyatts"
        + " group by i.indexrelid, i.indisprimary order by i.indisprimary desc, i.indexrelid limit 1")) {
      st.setLong(1, oid);
      try (ResultSet rs = st.executeQuery()) {
        if (rs.next()) {
          key = Arrays.asList((String[]) rs.getArray(1).getArray());
        }
      }
    }
    if ((spec.mode().equals("upsert") || spec.mode().equals("cdc")) && key.isEmpty()) {
      throw new CheckFailed(ErrorCode.NO_KEY, "table " + spec.tableSchema() + "." + spec.table());
    }
    List<String> privileges = new ArrayList<>();
    switch (spec.mode()) {
      case "append" -> privileges.add("INSERT");
      case "upsert" -> privileges.addAll(List.of("INSERT", "UPDATE"));
      case "cdc" -> {
        privileges.addAll(List.of("INSERT", "UPDATE", "DELETE"));
        if (spec.truncates()) {
          privileges.add("TRUNCATE");
        }
      }
      default -> { }
    }
    for (String p : privileges) {
      try (PreparedStatement st = c.prepareStatement("select has_table_privilege(?::oid, ?)")) {
        st.setLong(1, oid);
        st.setString(2, p);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          if (!rs.getBoolean(1)) {
            throw new CheckFailed(ErrorCode.PRIVILEGES, p + " on " + spec.tableSchema() + "." + spec.table());
          }
        }
      }
    }
    for (var e : spec.metadata().entrySet()) {
      if (!writable.contains(e.getValue())) {
        throw new CheckFailed(ErrorCode.METADATA_COLUMN_MISSING, "sink.metadata." + e.getKey() + " names column "
            + e.getValue());
      }
    }
    // a deferrable constraint (a foreign key, say) would be checked at COMMIT, after the savepoints that isolate a
    // refused row: the sink then makes each batch check it at once (SET CONSTRAINTS ALL IMMEDIATE)
    boolean deferrable;
    try (PreparedStatement st = c.prepareStatement("select exists (select 1 from pg_constraint where conrelid = ?"
        + " and condeferrable)")) {
      st.setLong(1, oid);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        deferrable = rs.getBoolean(1);
      }
    }
    return new TargetTable(List.copyOf(writable), Set.copyOf(generated), List.copyOf(key), deferrable);
  }

  /** A failed start check: the phase becomes {@code error} with {@code code}; {@code what} names the object. */
  static final class CheckFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final transient ErrorCode code;

    CheckFailed(ErrorCode code, String what) {
      super(what + ": " + code.fix());
      this.code = code;
    }
  }
}
