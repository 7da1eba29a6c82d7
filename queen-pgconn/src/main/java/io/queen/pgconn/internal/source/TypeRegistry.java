package io.queen.pgconn.internal.source;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What a column's type OID means for {@link Values}: its {@link Kind}, and for an array its element. Built-in
 * types (OID below 16384, stable across servers) are known statically; others (enums, domains, composites,
 * ranges and arrays of them, extension types) are loaded from {@code pg_type} by {@link #resolve} and cached
 * for the registry's life. A domain renders like its base type; an array renders as a JSON array when its
 * element (through domains) is a built-in type whose elements PostgreSQL separates with a comma, else as the
 * string PostgreSQL prints. An OID nobody resolved renders as text: nothing is guessed.
 *
 * <p>Thread-safe: {@link #resolve} and {@link #learn} may run on one thread while {@link #kind} runs on another.
 */
final class TypeRegistry {
  /** OIDs below this are PostgreSQL's own and never change ({@code FirstNormalObjectId}). */
  static final int FIRST_NORMAL_OID = 16384;

  /** How a type's printed text becomes JSON (see {@link Values}). */
  enum Kind {
    BOOL, INTEGER, NUMERIC, FLOAT, JSON, TIMESTAMPTZ, TIMESTAMP, BYTEA,
    /** A JSON array whose elements render by {@link #elementKind}. */
    ARRAY,
    /** The string PostgreSQL prints: everything else. */
    TEXT
  }

  /** One type: its name, how it renders, and for an array the element OID (0 otherwise). */
  record Info(int oid, String schema, String name, Kind kind, int elementOid) {}

  private static final Map<Integer, Info> BUILT_IN = new HashMap<>();
  /** Built-ins whose arrays render as JSON arrays (comma-delimited, printed in braces). */
  private static final Set<Integer> ARRAY_ELEMENTS = new HashSet<>();

  static {
    scalar(16, "bool", Kind.BOOL, 1000);
    scalar(17, "bytea", Kind.BYTEA, 1001);
    scalar(18, "char", Kind.TEXT, 1002);
    scalar(19, "name", Kind.TEXT, 1003);
    scalar(20, "int8", Kind.INTEGER, 1016);
    scalar(21, "int2", Kind.INTEGER, 1005);
    scalar(23, "int4", Kind.INTEGER, 1007);
    scalar(24, "regproc", Kind.TEXT, 1008);
    scalar(25, "text", Kind.TEXT, 1009);
    scalar(26, "oid", Kind.INTEGER, 1028);
    scalar(27, "tid", Kind.TEXT, 1010);
    scalar(28, "xid", Kind.TEXT, 1011);
    scalar(29, "cid", Kind.TEXT, 1012);
    scalar(114, "json", Kind.JSON, 199);
    scalar(142, "xml", Kind.TEXT, 143);
    scalar(600, "point", Kind.TEXT, 1017);
    scalar(601, "lseg", Kind.TEXT, 1018);
    scalar(602, "path", Kind.TEXT, 1019);
    scalar(604, "polygon", Kind.TEXT, 1027);
    scalar(628, "line", Kind.TEXT, 629);
    scalar(650, "cidr", Kind.TEXT, 651);
    scalar(700, "float4", Kind.FLOAT, 1021);
    scalar(701, "float8", Kind.FLOAT, 1022);
    scalar(718, "circle", Kind.TEXT, 719);
    scalar(774, "macaddr8", Kind.TEXT, 775);
    scalar(790, "money", Kind.TEXT, 791);
    scalar(829, "macaddr", Kind.TEXT, 1040);
    scalar(869, "inet", Kind.TEXT, 1041);
    scalar(1042, "bpchar", Kind.TEXT, 1014);
    scalar(1043, "varchar", Kind.TEXT, 1015);
    scalar(1082, "date", Kind.TEXT, 1182);
    scalar(1083, "time", Kind.TEXT, 1183);
    scalar(1114, "timestamp", Kind.TIMESTAMP, 1115);
    scalar(1184, "timestamptz", Kind.TIMESTAMPTZ, 1185);
    scalar(1186, "interval", Kind.TEXT, 1187);
    scalar(1266, "timetz", Kind.TEXT, 1270);
    scalar(1560, "bit", Kind.TEXT, 1561);
    scalar(1562, "varbit", Kind.TEXT, 1563);
    scalar(1700, "numeric", Kind.NUMERIC, 1231);
    scalar(2205, "regclass", Kind.TEXT, 2210);
    scalar(2206, "regtype", Kind.TEXT, 2211);
    scalar(2950, "uuid", Kind.TEXT, 2951);
    scalar(3220, "pg_lsn", Kind.TEXT, 3221);
    scalar(3614, "tsvector", Kind.TEXT, 3643);
    scalar(3615, "tsquery", Kind.TEXT, 3645);
    scalar(3802, "jsonb", Kind.JSON, 3807);
    scalar(4072, "jsonpath", Kind.TEXT, 4073);
    scalar(3904, "int4range", Kind.TEXT, 3905);
    scalar(3906, "numrange", Kind.TEXT, 3907);
    scalar(3908, "tsrange", Kind.TEXT, 3909);
    scalar(3910, "tstzrange", Kind.TEXT, 3911);
    scalar(3912, "daterange", Kind.TEXT, 3913);
    scalar(3926, "int8range", Kind.TEXT, 3927);
    scalar(5069, "xid8", Kind.TEXT, 271);
    // box prints ';' between array elements, the vectors print no braces: their arrays stay as printed
    scalar(603, "box", Kind.TEXT, 0);
    BUILT_IN.put(1020, new Info(1020, "pg_catalog", "_box", Kind.TEXT, 603));
    scalar(22, "int2vector", Kind.TEXT, 0);
    scalar(30, "oidvector", Kind.TEXT, 0);
  }

  private static void scalar(int oid, String name, Kind kind, int arrayOid) {
    BUILT_IN.put(oid, new Info(oid, "pg_catalog", name, kind, 0));
    if (arrayOid != 0) {
      ARRAY_ELEMENTS.add(oid);
      BUILT_IN.put(arrayOid, new Info(arrayOid, "pg_catalog", "_" + name, Kind.ARRAY, oid));
    }
  }

  /** Types loaded from pg_type (never built-ins). */
  private final Map<Integer, Info> loaded = new ConcurrentHashMap<>();
  /** Loaded domains: the built-in type each renders like. */
  private final Map<Integer, Integer> renderAs = new ConcurrentHashMap<>();

  /** How values of {@code oid} render; {@link Kind#TEXT} for a type that is neither built-in nor resolved. */
  Kind kind(int oid) {
    Info i = info(oid);
    return i == null ? Kind.TEXT : i.kind();
  }

  /** For an {@link Kind#ARRAY} type, how its elements render; {@link Kind#TEXT} otherwise. */
  Kind elementKind(int oid) {
    Info i = info(oid);
    return i == null || i.kind() != Kind.ARRAY ? Kind.TEXT : kind(i.elementOid());
  }

  /** Whether {@code oid} is built-in or was resolved. */
  boolean known(int oid) {
    return info(oid) != null;
  }

  /** The type's description, or null when neither built-in nor resolved. */
  Info info(int oid) {
    Info i = BUILT_IN.get(oid);
    return i != null ? i : loaded.get(oid);
  }

  /**
   * Takes note of a pgoutput 'Y' message. It carries only a schema and a name, so the type still needs
   * {@link #resolve}; when they differ from what was loaded for that OID (the type was dropped and the OID
   * reused), the cached description is dropped and the next {@code resolve} loads it anew.
   */
  void learn(PgMessage.Type t) {
    Info i = loaded.get(t.oid());
    if (i != null && !(i.schema().equals(t.schema()) && i.name().equals(t.name()))) {
      loaded.remove(t.oid());
      renderAs.remove(t.oid());
    }
  }

  /**
   * Loads from pg_type every OID of {@code oids} that is not known yet, with the domains' base types and the
   * arrays' element types they lead to; one query per level of that chain, none when all are known. An OID
   * pg_type does not have (a type dropped meanwhile) stays unknown and renders as text.
   */
  void resolve(Connection c, Collection<Integer> oids) throws SQLException {
    Set<Integer> todo = new LinkedHashSet<>();
    for (Integer oid : oids) {
      if (oid != null && !known(oid)) {
        todo.add(oid);
      }
    }
    Map<Integer, Row> rows = new HashMap<>();
    while (!todo.isEmpty()) {
      List<Row> got = query(c, todo);
      todo.clear();
      for (Row r : got) {
        rows.put(r.oid, r);
        for (int next : new int[] {r.baseType, r.element}) {
          if (next != 0 && !known(next) && !rows.containsKey(next)) {
            todo.add(next);
          }
        }
      }
    }
    for (Row r : rows.values()) {
      loaded.put(r.oid, describe(r, rows));
    }
  }

  private record Row(int oid, String schema, String name, char typtype, char category, int element, int baseType,
      char delimiter, boolean subscriptIsArray) {}

  private static final String TYPES = """
      SELECT t.oid::int8, n.nspname, t.typname, t.typtype, t.typcategory, t.typelem::int8, t.typbasetype::int8,
             t.typdelim, t.typsubscript = 'pg_catalog.array_subscript_handler'::regproc
        FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
       WHERE t.oid = ANY (?::oid[])""";

  private static List<Row> query(Connection c, Set<Integer> oids) throws SQLException {
    List<Row> out = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement(TYPES)) {
      Array array = c.createArrayOf("int8", oids.stream().map(Integer::toUnsignedLong).toArray());
      ps.setArray(1, array);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.add(new Row((int) rs.getLong(1), rs.getString(2), rs.getString(3), rs.getString(4).charAt(0),
              rs.getString(5).charAt(0), (int) rs.getLong(6), (int) rs.getLong(7), rs.getString(8).charAt(0),
              rs.getBoolean(9)));
        }
      } finally {
        array.free();
      }
    }
    return out;
  }

  /** How a loaded type renders: a domain as its base, a true array by its element, anything else as text. */
  private Info describe(Row r, Map<Integer, Row> rows) {
    if (r.typtype == 'd') {
      int b = builtInBase(r.oid, rows, 0);
      Info base = b == 0 ? null : BUILT_IN.get(b);
      if (base != null) {
        renderAs.put(r.oid, b);
        return new Info(r.oid, r.schema, r.name, base.kind(), base.elementOid());
      }
    } else if (r.subscriptIsArray && r.element != 0 && r.delimiter == ',') {
      int e = builtInBase(r.element, rows, 0);
      if (ARRAY_ELEMENTS.contains(e)) {
        return new Info(r.oid, r.schema, r.name, Kind.ARRAY, r.element);
      }
    }
    return new Info(r.oid, r.schema, r.name, Kind.TEXT, 0);
  }

  /** The built-in type {@code oid} renders like (itself, or the end of its chain of domains), or 0. */
  private int builtInBase(int oid, Map<Integer, Row> rows, int depth) {
    if (oid < FIRST_NORMAL_OID) {
      return BUILT_IN.containsKey(oid) ? oid : 0;
    }
    Integer known = renderAs.get(oid);
    if (known != null) {
      return known;
    }
    Row r = rows.get(oid);
    return r != null && r.typtype == 'd' && r.baseType != 0 && depth < 32
        ? builtInBase(r.baseType, rows, depth + 1) : 0;
  }
}
