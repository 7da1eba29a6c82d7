package io.queen.pgconn.internal.spec;

import java.util.regex.Pattern;

/**
 * The one place queen-pgconn turns a name into SQL. A name from a document or from Queen's configuration (schema,
 * table, publication, slot) is checked against {@link #RULE} and then double-quoted ({@link #quote}); a name read
 * from PostgreSQL's catalog (a column, a table as the catalog spells it) is double-quoted with any double quote
 * doubled ({@link #quoteCatalogName}); a name only shown to an operator in a message is written as they would type
 * it ({@link #written}). Nothing else in the module writes a double quote around a name.
 */
public final class Ident {
  /** An unquoted-style PostgreSQL identifier, either case, at most 63 bytes. */
  public static final Pattern RULE = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}");

  private static final Pattern PLAIN = Pattern.compile("[a-z_][a-z0-9_$]*");

  private Ident() {}

  /** Whether {@code s} matches {@link #RULE} (null does not). */
  public static boolean valid(String s) {
    return s != null && RULE.matcher(s).matches();
  }

  /**
   * A name read from PostgreSQL's catalog (a target table's column), double-quoted with any double quote doubled:
   * the database already holds it as an identifier, so it needs no allow-list, and a column named {@code unit
   * price} or {@code prénom} is written like any other.
   */
  public static String quoteCatalogName(String name) {
    if (name == null || name.isEmpty() || name.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("not a catalog name");
    }
    return "\"" + name.replace("\"", "\"\"") + "\"";
  }

  /** {@code ident} double-quoted; an identifier outside {@link #RULE} is refused (the message names the rule). */
  public static String quote(String ident) {
    if (!valid(ident)) {
      throw new IllegalArgumentException("identifier not allowed (" + RULE.pattern() + ")");
    }
    return "\"" + ident + "\"";
  }

  /**
   * {@code ident} double-quoted, refused outside {@link #RULE} with a message that names what it is and the
   * value: for names from configuration, which are not secret ({@code what} such as "Queen's schema").
   */
  public static String quote(String what, String ident) {
    if (!valid(ident)) {
      throw new IllegalArgumentException(what + ": given " + (ident == null ? "nothing" : "\"" + ident + "\"")
          + "; allowed is " + RULE.pattern());
    }
    return "\"" + ident + "\"";
  }

  /**
   * {@code name} as an operator types it in SQL, for a message: bare where PostgreSQL keeps it as written
   * (lower case, digits, {@code _}, {@code $}), otherwise double-quoted with any double quote doubled.
   */
  public static String written(String name) {
    return PLAIN.matcher(name).matches() ? name : quoteCatalogName(name);
  }
}
