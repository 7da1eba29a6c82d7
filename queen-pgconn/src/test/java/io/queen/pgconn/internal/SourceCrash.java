package io.queen.pgconn.internal;

import io.queen.Queen;

/**
 * The fault tests' way to crash one node's source: it reaches the registry's package-private hook through the node's
 * {@code connectors()} (the registry itself), so production code keeps no static map of live sources.
 */
public final class SourceCrash {
  private SourceCrash() {}

  /**
   * Stops {@code source} on {@code node} as a crash would: streaming ends at once and its lease is neither renewed nor
   * given back, so another node takes over only once it runs out. True when the source was running on that node.
   */
  public static boolean halt(Queen node, String source) {
    return ((Registry) node.connectors()).halt(source);
  }
}
