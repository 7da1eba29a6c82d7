package io.queen;

import java.util.Objects;

/**
 * The rules for names that reach SQL. Every public entry point checks its names here before
 * anything is sent to the database, so a bad name fails fast with the field it came from and the
 * rule it broke, and changes nothing.
 */
public final class Names {
  /** Queue and consumer group names: {@value}. */
  public static final String NAME_RULE = "[A-Za-z0-9._-]{1,128}";
  /** KV namespaces: {@value}. */
  public static final String NAMESPACE_RULE = "[A-Za-z0-9._:-]{1,128}";
  /** The longest partition name, in UTF-8 bytes. */
  public static final int MAX_PARTITION_BYTES = 128;
  /** The longest KV key, in UTF-8 bytes. */
  public static final int MAX_KEY_BYTES = 512;

  private Names() {}

  /** Checks a queue name; returns it. */
  public static String queue(String name) {
    return checkName("queue", name);
  }

  /**
   * Checks a consumer group name; returns it. Names starting with {@code __} are reserved for
   * Queen's own groups (the default group of a queue).
   */
  public static String group(String name) {
    checkName("group", name);
    if (name.startsWith("__")) {
      throw new IllegalArgumentException("group '" + name + "' is reserved: names starting with '__' belong to Queen");
    }
    return name;
  }

  /**
   * Checks a partition name: 1 to 128 UTF-8 bytes of Unicode text (no unpaired UTF-16 surrogate, which the
   * database's UTF-8 could only store as a replacement character, so the stored name would differ from the one
   * given), no NUL character. Returns it.
   */
  public static String partition(String name) {
    Objects.requireNonNull(name, "partition must not be null");
    long bytes = text("partition name", name);
    if (bytes == 0 || bytes > MAX_PARTITION_BYTES) {
      throw new IllegalArgumentException("partition name must be 1.." + MAX_PARTITION_BYTES
          + " UTF-8 bytes, was " + bytes + " bytes");
    }
    return name;
  }

  /** Checks a KV namespace against {@link #NAMESPACE_RULE}; returns it. */
  public static String namespace(String ns) {
    Objects.requireNonNull(ns, "namespace must not be null");
    if (!allowed(ns, true)) {
      throw new IllegalArgumentException("namespace '" + shorten(ns) + "' is invalid: allowed is " + NAMESPACE_RULE);
    }
    return ns;
  }

  /** Checks a KV key: 1 to 512 UTF-8 bytes of Unicode text (no unpaired UTF-16 surrogate), no NUL character. Returns it. */
  public static String key(String key) {
    Objects.requireNonNull(key, "key must not be null");
    long bytes = text("key", key);
    if (bytes == 0 || bytes > MAX_KEY_BYTES) {
      throw new IllegalArgumentException("key must be 1.." + MAX_KEY_BYTES + " UTF-8 bytes, was " + bytes + " bytes");
    }
    return key;
  }

  /**
   * The UTF-8 length of {@code s}, counted without encoding it; throws for a NUL character or an unpaired
   * surrogate ({@code what} names the value). Called for every pushed item, so it allocates nothing.
   */
  private static long text(String what, String s) {
    long bytes = 0;
    int n = s.length();
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (c < 0x80) {
        if (c == 0) {
          throw new IllegalArgumentException(what + " must not contain the NUL character");
        }
        bytes++;
      } else if (c < 0x800) {
        bytes += 2;
      } else if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
        bytes += 4;
        i++;
      } else if (Character.isSurrogate(c)) {
        throw new IllegalArgumentException(what + " holds an unpaired UTF-16 surrogate at index " + i
            + ": it is not Unicode text");
      } else {
        bytes += 3;
      }
    }
    return bytes;
  }

  /** Whether {@code s} matches {@link #NAME_RULE} (or, with {@code colon}, {@link #NAMESPACE_RULE}); no regex: every push checks its queue. */
  private static boolean allowed(String s, boolean colon) {
    int n = s.length();
    if (n < 1 || n > 128) {
      return false;
    }
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_'
          || c == '-' || (colon && c == ':');
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  private static String checkName(String field, String name) {
    Objects.requireNonNull(name, field);
    if (!allowed(name, false)) {
      throw new IllegalArgumentException(field + " name '" + shorten(name) + "' is invalid: allowed is " + NAME_RULE);
    }
    return name;
  }

  static String shorten(String s) {
    return s.length() <= 64 ? s : s.substring(0, 61) + "...";
  }
}
