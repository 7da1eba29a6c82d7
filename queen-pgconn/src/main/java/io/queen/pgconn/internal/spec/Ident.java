package io.queen.pgconn.internal.spec;

import java.util.regex.Pattern;

/** The identifiers that reach SQL: checked against an allow-list, then always double-quoted. */
public final class Ident {
  /** An unquoted-style PostgreSQL identifier, either case, at most 63 bytes. */
  public static final Pattern RULE = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}");

  private Ident() {}

  /** Whether {@code s} matches {@link #RULE} (null does not). */
  public static boolean valid(String s) {
    return s != null && RULE.matcher(s).matches();
  }

  /**
   * A name read from PostgreSQL's catalog (a target table's column), double-quoted with any double quote doubled:
   * the database already holds it as an identifier, so it needs no allow-list, and a column named {@code unit
   * price} or {@code prénom} is written like any other (it was refused, and the sink retried its batch for good).
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
}
