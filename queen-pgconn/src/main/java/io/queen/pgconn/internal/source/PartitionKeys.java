package io.queen.pgconn.internal.source;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;

/**
 * The Queen partition of a row: its key, or its {@code partitionBy} columns, as
 * PostgreSQL prints them. One value as printed ({@code 42}); several joined with {@code |}, where a {@code |}
 * or {@code \} inside a value is escaped with {@code \} and NULL is written {@code \N}. A name over
 * {@value #MAX_BYTES} UTF-8 bytes (or an empty one, which Queen does not accept) becomes {@code ~} and the first
 * 32 hex digits (lower case) of its SHA-256. Stateless and thread-safe.
 */
final class PartitionKeys {
  /** The one partition of {@code partitionBy: "single"}. */
  static final String SINGLE = "all";
  /** The longest partition name Queen takes, in UTF-8 bytes. */
  static final int MAX_BYTES = 128;
  static final String NULL = "\\N";

  private PartitionKeys() {}

  /** The partition for these printed values (null elements are SQL NULLs), in the key's column order. */
  static String of(List<String> printedValues) {
    if (printedValues == null || printedValues.isEmpty()) {
      throw new IllegalArgumentException("a partition needs at least one value");
    }
    String name;
    if (printedValues.size() == 1) {
      String v = printedValues.get(0);
      name = v == null ? NULL : v;
    } else {
      StringBuilder b = new StringBuilder();
      for (int k = 0; k < printedValues.size(); k++) {
        String v = printedValues.get(k);
        if (k > 0) {
          b.append('|');
        }
        if (v == null) {
          b.append(NULL);
          continue;
        }
        for (int i = 0; i < v.length(); i++) {
          char c = v.charAt(i);
          if (c == '|' || c == '\\') {
            b.append('\\');
          }
          b.append(c);
        }
      }
      name = b.toString();
    }
    byte[] utf8 = name.getBytes(StandardCharsets.UTF_8);
    if (utf8.length == 0 || utf8.length > MAX_BYTES) {
      return "~" + HexFormat.of().formatHex(sha256(utf8)).substring(0, 32);
    }
    return name;
  }

  private static byte[] sha256(byte[] b) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(b);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from this JVM", e);
    }
  }
}
