package io.queen;

import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.regex.Pattern;

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

  private static final Pattern NAME = Pattern.compile(NAME_RULE);
  private static final Pattern NAMESPACE = Pattern.compile(NAMESPACE_RULE);

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

  /** Checks a partition name: 1 to 128 UTF-8 bytes, no NUL character. Returns it. */
  public static String partition(String name) {
    Objects.requireNonNull(name, "partition must not be null");
    int bytes = name.getBytes(StandardCharsets.UTF_8).length;
    if (bytes == 0 || bytes > MAX_PARTITION_BYTES) {
      throw new IllegalArgumentException("partition name must be 1.." + MAX_PARTITION_BYTES
          + " UTF-8 bytes, was " + bytes + " bytes");
    }
    if (name.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("partition name must not contain the NUL character");
    }
    return name;
  }

  /** Checks a KV namespace against {@link #NAMESPACE_RULE}; returns it. */
  public static String namespace(String ns) {
    Objects.requireNonNull(ns, "namespace must not be null");
    if (!NAMESPACE.matcher(ns).matches()) {
      throw new IllegalArgumentException("namespace '" + shorten(ns) + "' is invalid: allowed is " + NAMESPACE_RULE);
    }
    return ns;
  }

  /** Checks a KV key: 1 to 512 UTF-8 bytes, no NUL character. Returns it. */
  public static String key(String key) {
    Objects.requireNonNull(key, "key must not be null");
    int bytes = key.getBytes(StandardCharsets.UTF_8).length;
    if (bytes == 0 || bytes > MAX_KEY_BYTES) {
      throw new IllegalArgumentException("key must be 1.." + MAX_KEY_BYTES + " UTF-8 bytes, was " + bytes + " bytes");
    }
    if (key.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("key must not contain the NUL character");
    }
    return key;
  }

  private static String checkName(String field, String name) {
    Objects.requireNonNull(name, field);
    if (!NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(field + " name '" + shorten(name) + "' is invalid: allowed is " + NAME_RULE);
    }
    return name;
  }

  static String shorten(String s) {
    return s.length() <= 64 ? s : s.substring(0, 61) + "...";
  }
}
