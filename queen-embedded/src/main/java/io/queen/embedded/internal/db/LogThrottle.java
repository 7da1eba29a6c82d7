package io.queen.embedded.internal.db;

import java.util.HashMap;
import java.util.Map;

/**
 * Summarises repeated identical log events, so that a poison message or a database outage does not
 * print a stack trace storm. Within a window (a minute by default) the first event of a kind is logged in
 * full (with its stack trace), the next few in one line each, and the rest only counted; the count is
 * reported with the first event of the next window. Thread-safe.
 */
public final class LogThrottle {
  /** How an event should be logged. */
  public enum Level {
    /** The first of its kind in the window: log it with its stack trace. */
    FULL,
    /** A repeat: one line, no stack trace. */
    SHORT,
    /** Too many repeats: do not log; it is counted. */
    SUPPRESS
  }

  /**
   * The decision for one event.
   *
   * @param level how to log it
   * @param suppressedBefore events of this kind that were not logged in the previous window (report them now)
   */
  public record Decision(Level level, long suppressedBefore) {}

  private static final int MAX_KINDS = 1000;

  private final long windowNanos;
  private final int linesPerWindow;
  private final Map<String, long[]> kinds = new HashMap<>(); // key -> {window start, count}

  /**
   * @param windowMillis the window length
   * @param linesPerWindow how many events of a kind are logged per window (the first of them in full)
   */
  public LogThrottle(long windowMillis, int linesPerWindow) {
    this.windowNanos = windowMillis * 1_000_000L;
    this.linesPerWindow = linesPerWindow;
  }

  /** The default: a minute, ten lines per kind. */
  public LogThrottle() {
    this(60_000, 10);
  }

  /** Registers one event of kind {@code key} and says how to log it. */
  public synchronized Decision admit(String key) {
    long now = System.nanoTime();
    long[] st = kinds.get(key);
    if (st == null || now - st[0] > windowNanos) {
      long suppressed = st == null ? 0 : Math.max(0, st[1] - linesPerWindow);
      if (st == null && kinds.size() >= MAX_KINDS) {
        kinds.clear(); // bounded memory: forgetting only costs a stack trace too many
      }
      kinds.put(key, new long[] {now, 1});
      return new Decision(Level.FULL, suppressed);
    }
    st[1]++;
    return new Decision(st[1] <= linesPerWindow ? Level.SHORT : Level.SUPPRESS, 0);
  }

  /**
   * The events not logged so far in the current windows, by kind, and forgets them (for a summary when
   * the component that logs them stops).
   */
  public synchronized Map<String, Long> drainSuppressed() {
    Map<String, Long> out = new java.util.LinkedHashMap<>();
    kinds.forEach((k, st) -> {
      if (st[1] > linesPerWindow) {
        out.put(k, st[1] - linesPerWindow);
      }
    });
    kinds.clear();
    return out;
  }

  /** The kind of a failure: where it happened and what it was (type and first line of its message). */
  public static String kind(String where, Throwable t) {
    String msg = t.getMessage();
    if (msg != null) {
      int nl = msg.indexOf('\n');
      msg = nl >= 0 ? msg.substring(0, nl) : msg;
      msg = msg.length() > 200 ? msg.substring(0, 200) : msg;
    }
    return where + '|' + t.getClass().getName() + '|' + msg;
  }
}
