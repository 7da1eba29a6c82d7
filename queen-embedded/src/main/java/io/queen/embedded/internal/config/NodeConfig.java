package io.queen.embedded.internal.config;

import java.time.Duration;
import java.util.concurrent.ThreadFactory;

/**
 * The node itself: its id, the application's factory of consumer threads (null: Queen's daemon threads), its session
 * timeout (and the heartbeat derived from it), the grace period of its close, the longest sleep of a waiting consumer
 * and whether it listens for wake-ups.
 */
public record NodeConfig(String nodeId, ThreadFactory threadFactory, Duration sessionTimeout, Duration closeGrace,
    Duration pollInterval, boolean listen) {

  /** The heartbeat interval, derived from the session timeout: a fifth of it, at most 2 s. */
  public Duration heartbeatInterval() {
    return heartbeatInterval(sessionTimeout);
  }

  /** A fifth of {@code sessionTimeout}, at most 2 s (so at least five beats fit in one session timeout). */
  public static Duration heartbeatInterval(Duration sessionTimeout) {
    Duration fifth = sessionTimeout.dividedBy(5);
    return fifth.compareTo(Duration.ofSeconds(2)) > 0 ? Duration.ofSeconds(2) : fifth;
  }
}
