package io.queen.pgconn.internal.source;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * PostgreSQL's text output of a value to the JSON of a change event, the same
 * for the stream (pgoutput text) and the snapshot ({@code getString} on a text-format result), provided both
 * sessions run with {@link #SETTINGS}:
 *
 * <ul>
 *   <li>bool: {@code true}/{@code false};
 *   <li>integers, numeric, float4 and float8: JSON numbers written with exactly the digits PostgreSQL printed
 *       (never through a double: {@code 42.00}, a 30-digit numeric, a bigint above 2^53 and a float8's
 *       shortest exact form stay as printed); {@code NaN}, {@code Infinity}, {@code -Infinity}: strings;
 *   <li>json and jsonb: embedded as printed, without the whitespace between tokens (so with exact decimals);
 *   <li>timestamptz: {@code 2026-10-03T06:14:39.365472+00:00}; timestamp: {@code 2026-10-03T06:14:39.365472};
 *       {@code infinity}, {@code -infinity} and BC dates: the string as printed;
 *   <li>arrays of built-in types: JSON arrays (nested for more dimensions), each element by its type's rule;
 *       an array with explicit bounds ({@code [0:1]={...}}) or of other types: the string as printed;
 *   <li>bytea ({@code \x...}) and everything else: the string as printed.
 * </ul>
 *
 * The JSON is written as text straight into the event's builder, with strings escaped as Jackson escapes them
 * ({@link #string}); no tree of nodes is built (a source writes hundreds of thousands of events per second).
 * Stateless and thread-safe.
 */
final class Values {
  /**
   * What both the walsender and the snapshot session must run with so they print identically, whatever the
   * JVM's zone or the role's and database's defaults.
   */
  static final Map<String, String> SETTINGS = Collections.unmodifiableMap(settings());

  private static Map<String, String> settings() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("TimeZone", "UTC");
    m.put("DateStyle", "ISO");
    m.put("IntervalStyle", "postgres");
    m.put("bytea_output", "hex");
    m.put("extra_float_digits", "1");
    return m;
  }

  private Values() {}

  /**
   * The pgjdbc connection properties for a session whose values are read as text: {@code options} carrying
   * {@link #SETTINGS} (as {@code -c name=value}) and {@code binaryTransfer=false}, because a binary result
   * makes {@code getString} format a value in the JVM instead of printing it as PostgreSQL does. pgjdbc's
   * startup packet sets {@code TimeZone} to the JVM's zone (and {@code extra_float_digits}), which overrides
   * {@code options}, and a login event trigger can change settings after that: call {@link #apply} after
   * connecting; these properties alone are not enough.
   */
  static Properties sessionSettings() {
    Properties p = new Properties();
    StringBuilder options = new StringBuilder();
    for (Map.Entry<String, String> e : SETTINGS.entrySet()) {
      options.append(options.isEmpty() ? "" : " ").append("-c ").append(e.getKey()).append('=').append(e.getValue());
    }
    p.setProperty("options", options.toString());
    p.setProperty("binaryTransfer", "false");
    return p;
  }

  /**
   * SETs {@link #SETTINGS} on an open session (a normal connection, or a replication connection before
   * {@code START_REPLICATION}: the walsender runs these in the simple query protocol too). Session-level, so
   * the caller must not run it inside a transaction it later rolls back.
   */
  static void apply(Connection c) throws SQLException {
    try (Statement st = c.createStatement()) {
      for (Map.Entry<String, String> e : SETTINGS.entrySet()) {
        st.execute("SET " + e.getKey() + " = '" + e.getValue() + "'");
      }
    }
  }

  /**
   * The JSON of one value printed by PostgreSQL ({@code text} null gives {@code null}), appended to {@code out}.
   *
   * @param typeOid the column's type, resolved through {@code types} for non-built-ins
   */
  static void write(StringBuilder out, TypeRegistry types, int typeOid, String text) {
    if (text == null) {
      out.append("null");
      return;
    }
    TypeRegistry.Kind kind = types.kind(typeOid);
    if (kind == TypeRegistry.Kind.ARRAY) {
      int mark = out.length();
      if (text.isEmpty() || text.charAt(0) != '{' || !new ArrayParser(text, types.elementKind(typeOid), out).parse()) {
        out.setLength(mark); // explicit bounds [0:1]={...}, or not PostgreSQL's array output: as printed
        string(out, text);
      }
      return;
    }
    scalar(out, kind, text);
  }

  /** {@link #write} into a string of its own. */
  static String text(TypeRegistry types, int typeOid, String text) {
    StringBuilder b = new StringBuilder(text == null ? 4 : text.length() + 8);
    write(b, types, typeOid, text);
    return b.toString();
  }

  /** One value of a non-array kind (an array's element too). */
  private static void scalar(StringBuilder out, TypeRegistry.Kind kind, String text) {
    switch (kind) {
      case BOOL -> {
        if (text.equals("t")) {
          out.append("true");
        } else if (text.equals("f")) {
          out.append("false");
        } else {
          string(out, text);
        }
      }
      case INTEGER -> integer(out, text);
      case NUMERIC, FLOAT -> {
        if (isNumber(text)) {
          out.append(text); // exactly the digits PostgreSQL printed
        } else {
          string(out, text); // NaN, Infinity, -Infinity
        }
      }
      case JSON -> json(out, text);
      case TIMESTAMPTZ -> timestamp(out, text, true);
      case TIMESTAMP -> timestamp(out, text, false);
      default -> string(out, text);
    }
  }

  private static void integer(StringBuilder out, String text) {
    try {
      out.append(Long.parseLong(text));
    } catch (NumberFormatException e) {
      if (isNumber(text)) {
        out.append(text);
      } else {
        string(out, text);
      }
    }
  }

  /** {@code -?\d+(\.\d+)?([eE][+-]?\d+)?}: how PostgreSQL prints a finite number. */
  private static boolean isNumber(String s) {
    int n = s.length();
    int i = s.startsWith("-") ? 1 : 0;
    int digits = digits(s, i);
    if (digits == 0) {
      return false;
    }
    i += digits;
    if (i < n && s.charAt(i) == '.') {
      digits = digits(s, i + 1);
      if (digits == 0) {
        return false;
      }
      i += 1 + digits;
    }
    if (i < n && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
      i++;
      if (i < n && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
        i++;
      }
      digits = digits(s, i);
      if (digits == 0) {
        return false;
      }
      i += digits;
    }
    return i == n;
  }

  private static int digits(String s, int from) {
    int i = from;
    while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
      i++;
    }
    return i - from;
  }

  /**
   * The deepest nesting, the longest number and the longest member name (as written) a json/jsonb value may hold to
   * be embedded, not quoted: the limits its parser had while values were read into trees.
   */
  private static final int MAX_JSON_DEPTH = 10_000;
  private static final int MAX_JSON_NUMBER = 200_000;
  private static final int MAX_JSON_NAME = 50_000;

  /**
   * A json or jsonb value embedded as it is, without the whitespace between tokens: its numbers keep the digits and
   * scale PostgreSQL printed, and Queen stores the payload as jsonb, which reads it to the same value. A value
   * nested deeper than {@value #MAX_JSON_DEPTH} levels, with a number longer than {@value #MAX_JSON_NUMBER}
   * characters or a member name longer than {@value #MAX_JSON_NAME} is kept as the string PostgreSQL printed (the
   * reader could not take it as JSON).
   */
  private static void json(StringBuilder out, String text) {
    int mark = out.length();
    int n = text.length();
    int depth = 0;
    int number = 0;
    int stringStart = -1;
    int lastString = 0; // the length of the string just closed, while only whitespace follows it
    boolean inString = false;
    boolean tooLong = false;
    for (int i = 0; i < n && !tooLong; i++) {
      char c = text.charAt(i);
      if (inString) {
        out.append(c);
        if (c == '\\' && i + 1 < n) {
          out.append(text.charAt(++i));
        } else if (c == '"') {
          inString = false;
          lastString = i - stringStart - 1;
        }
        continue;
      }
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        number = 0;
        continue;
      }
      if (c == ':' && lastString > MAX_JSON_NAME) {
        tooLong = true; // a member name
      }
      lastString = 0;
      if (c == '"') {
        inString = true;
        stringStart = i;
      } else if (c == '{' || c == '[') {
        tooLong = ++depth > MAX_JSON_DEPTH;
      } else if (c == '}' || c == ']') {
        depth--;
      }
      number = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' ? number + 1 : 0;
      tooLong |= number > MAX_JSON_NUMBER;
      out.append(c);
      if (c == ',' || c == ':') {
        number = 0;
      }
    }
    if (tooLong || depth != 0 || inString) {
      out.setLength(mark);
      string(out, text);
    }
  }

  /**
   * timestamptz {@code 2026-10-03 06:14:39.365472+00} as {@code 2026-10-03T06:14:39.365472+00:00} (an offset with
   * seconds keeps them); timestamp {@code 2026-10-03 06:14:39.365472} as {@code 2026-10-03T06:14:39.365472};
   * {@code infinity}, {@code -infinity} and BC dates as printed.
   */
  private static void timestamp(StringBuilder out, String s, boolean zoned) {
    int n = s.length();
    int space = s.indexOf(' ');
    // the date: at least four year digits, then -MM-DD
    boolean ok = space >= 10 && digits(s, 0) == space - 6 && s.charAt(space - 6) == '-' && s.charAt(space - 3) == '-'
        && digits(s, space - 5) == 2 && digits(s, space - 2) == 2;
    // the time: HH:MM:SS, then up to six fractional digits
    int t = space + 1;
    ok = ok && t + 8 <= n && digits(s, t) == 2 && s.charAt(t + 2) == ':' && digits(s, t + 3) == 2
        && s.charAt(t + 5) == ':' && digits(s, t + 6) == 2;
    int end = t + 8;
    if (ok && end < n && s.charAt(end) == '.') {
      int f = digits(s, end + 1);
      ok = f >= 1 && f <= 6;
      end += 1 + f;
    }
    int zone = end;
    if (ok && zoned) {
      // the offset: +HH, then optionally :MM and :SS
      ok = end + 3 <= n && (s.charAt(end) == '+' || s.charAt(end) == '-') && digits(s, end + 1) == 2;
      end += 3;
      for (int part = 0; ok && part < 2 && end < n; part++) {
        ok = end + 3 <= n && s.charAt(end) == ':' && digits(s, end + 1) == 2;
        end += 3;
      }
    }
    if (!ok || end != n) {
      string(out, s);
      return;
    }
    out.append('"').append(s, 0, space).append('T').append(s, t, zone);
    if (zoned) {
      out.append(s, zone, n);
      if (n - zone == 3) {
        out.append(":00");
      }
    }
    out.append('"');
  }

  private static final char[] HEX = "0123456789ABCDEF".toCharArray();

  /**
   * A JSON string, escaped as Jackson writes one: {@code \"} and {@code \\}, the short escapes of backspace, tab,
   * newline, form feed and carriage return, a six-character escape (backslash, {@code u00}, two upper-case hex
   * digits) for the other control characters; everything else as it is.
   */
  static void string(StringBuilder out, String s) {
    out.append('"');
    int n = s.length();
    int from = 0;
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (c >= 0x20 && c != '"' && c != '\\') {
        continue;
      }
      out.append(s, from, i).append('\\');
      switch (c) {
        case '"' -> out.append('"');
        case '\\' -> out.append('\\');
        case '\b' -> out.append('b');
        case '\t' -> out.append('t');
        case '\n' -> out.append('n');
        case '\f' -> out.append('f');
        case '\r' -> out.append('r');
        default -> out.append("u00").append(HEX[c >> 4]).append(HEX[c & 0xF]);
      }
      from = i + 1;
    }
    out.append(s, from, n).append('"');
  }

  /**
   * PostgreSQL's array output: {@code {a,b}}, nested braces per dimension, elements in double quotes when they
   * hold a delimiter, brace, quote, backslash or space or are empty or {@code NULL} (with {@code \\} escaping
   * {@code "} and {@code \\}), an unquoted {@code NULL} for a null element, written as a JSON array. {@link #parse}
   * returns false for anything else, and the caller keeps the text.
   */
  private static final class ArrayParser {
    private final String s;
    private final TypeRegistry.Kind element;
    private final StringBuilder out;
    private int i;

    ArrayParser(String s, TypeRegistry.Kind element, StringBuilder out) {
      this.s = s;
      this.element = element;
      this.out = out;
    }

    boolean parse() {
      return level() && i == s.length();
    }

    private boolean level() {
      if (i >= s.length() || s.charAt(i) != '{') {
        return false;
      }
      i++;
      out.append('[');
      if (i < s.length() && s.charAt(i) == '}') {
        i++;
        out.append(']');
        return true;
      }
      boolean first = true;
      while (i < s.length()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        char c = s.charAt(i);
        if (c == '{') {
          if (!level()) {
            return false;
          }
        } else if (c == '"') {
          String v = quoted();
          if (v == null) {
            return false;
          }
          scalar(out, element, v);
        } else {
          int start = i;
          while (i < s.length() && s.charAt(i) != ',' && s.charAt(i) != '}') {
            char d = s.charAt(i);
            if (d == '"' || d == '{' || d == '\\') {
              return false;
            }
            i++;
          }
          String v = s.substring(start, i);
          if (v.isEmpty()) {
            return false;
          }
          if (v.equals("NULL")) {
            out.append("null");
          } else {
            scalar(out, element, v);
          }
        }
        if (i >= s.length()) {
          return false;
        }
        char sep = s.charAt(i++);
        if (sep == '}') {
          out.append(']');
          return true;
        }
        if (sep != ',') {
          return false;
        }
      }
      return false;
    }

    private String quoted() {
      StringBuilder b = new StringBuilder();
      i++;
      while (i < s.length()) {
        char c = s.charAt(i++);
        if (c == '"') {
          return b.toString();
        }
        if (c == '\\') {
          if (i >= s.length()) {
            return null;
          }
          c = s.charAt(i++);
        }
        b.append(c);
      }
      return null;
    }
  }
}
