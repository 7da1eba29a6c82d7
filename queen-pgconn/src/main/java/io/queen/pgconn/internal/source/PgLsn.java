package io.queen.pgconn.internal.source;

import java.util.Locale;

/**
 * PostgreSQL WAL positions (LSNs) as text: {@code 0/1526990}, the way PostgreSQL prints a {@code pg_lsn}, and
 * the 16 hex digits of a message id. An LSN is an unsigned 64-bit value held in a {@code long}; compare two
 * with {@link Long#compareUnsigned}. Stateless and thread-safe.
 */
final class PgLsn {
  private static final int MAX_ECHO = 40;

  private PgLsn() {}

  /** {@code 0/1526990}: the high and low 32 bits in upper-case hex, without leading zeros, as PostgreSQL prints. */
  static String format(long lsn) {
    return Long.toHexString(lsn >>> 32).toUpperCase(Locale.ROOT) + "/"
        + Long.toHexString(lsn & 0xFFFF_FFFFL).toUpperCase(Locale.ROOT);
  }

  /**
   * The inverse of {@link #format}: two groups of 1 to 8 hex digits (either case) around a {@code /}, as
   * PostgreSQL's {@code pg_lsn} accepts them.
   *
   * @throws IllegalArgumentException for null or anything else
   */
  static long parse(String text) {
    if (text == null) {
      throw new IllegalArgumentException("LSN is null; expected two groups of 1 to 8 hex digits like 0/1526990");
    }
    int slash = text.indexOf('/');
    if (slash < 1 || slash > 8 || text.length() - slash - 1 < 1 || text.length() - slash - 1 > 8
        || !hex(text, 0, slash) || !hex(text, slash + 1, text.length())) {
      String shown = text.length() > MAX_ECHO ? text.substring(0, MAX_ECHO) + "..." : text;
      throw new IllegalArgumentException(
          "not an LSN: '" + shown + "'; expected two groups of 1 to 8 hex digits like 0/1526990");
    }
    long hi = Long.parseLong(text, 0, slash, 16);
    long lo = Long.parseLong(text, slash + 1, text.length(), 16);
    return hi << 32 | lo;
  }

  /** 16 upper-case hex digits with leading zeros ({@code 0000000001570D68}): the LSN part of a message id. */
  static String hex16(long lsn) {
    String h = Long.toHexString(lsn).toUpperCase(Locale.ROOT);
    return "0".repeat(16 - h.length()) + h;
  }

  private static boolean hex(String s, int from, int to) {
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
        return false;
      }
    }
    return true;
  }
}
