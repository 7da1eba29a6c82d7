package io.queen.embedded.internal.log;

import io.queen.Queen;
import io.queen.embedded.internal.QueenImpl;
import java.util.Map;

/**
 * What a started node's log part holds in memory, read through the package's own accessors for tests of other
 * packages: the wake-ups' counts and view of other nodes, the names the catalogue keeps.
 */
public final class LogState {
  private LogState() {}

  /** NOTIFY statements the node's notifier sent so far. */
  public static long notificationsSent(Queen node) {
    return wakeups(node).notificationsSent();
  }

  /** Notifications of the node's own pushes that its listener received and ignored. */
  public static long ownNotificationsIgnored(Queen node) {
    return wakeups(node).ownNotificationsIgnored();
  }

  /** Whether the node currently notifies other nodes of its pushes (another node of its schema is alive). */
  public static boolean othersAlive(Queen node) {
    return wakeups(node).othersAlive();
  }

  /** How many queue and group names the node holds in memory, by map. */
  public static Map<String, Integer> namesHeld(Queen node) {
    return ((QueenImpl) node).broker().catalogue().namesHeld();
  }

  private static Wakeups wakeups(Queen node) {
    return ((QueenImpl) node).wakeups();
  }
}
