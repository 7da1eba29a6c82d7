package io.queen.embedded.internal.ops;

import io.queen.Queen;
import io.queen.embedded.internal.QueenImpl;

/**
 * The janitor's watches of a started node, made for a test to run when it wants: on the node's own pool, schema,
 * metrics and broker, so what a pass writes (gauges, log lines, names forgotten) is what the node's janitor writes.
 * Each is a watch of its own, with its own memory of earlier passes: the node's janitor runs its own beside it, so a
 * test that counts a watch's log lines counts those of its own thread ({@link #here()}).
 */
final class Watches {
  private Watches() {}

  /** How the log names the calling thread: the lines of the watches a test runs itself. */
  static String here() {
    return "[" + Thread.currentThread().getName() + "]";
  }

  static GroupWatch groups(Queen queen) {
    QueenImpl node = (QueenImpl) queen;
    String schema = node.broker().schema();
    javax.sql.DataSource ds = node.broker().dataSource();
    return new GroupWatch(node.nodeId(), ds, schema, new StatusReader(ds, schema, node.broker().cipher().ids()),
        node.metrics(), node.broker().catalogue());
  }

  static HorizonWatch horizon(Queen queen) {
    QueenImpl node = (QueenImpl) queen;
    return new HorizonWatch(node.nodeId(), node.broker().dataSource(), node.metrics(),
        node.config().housekeeping().horizonWarnAfter());
  }

  static StatisticsGuard statistics(Queen queen) {
    QueenImpl node = (QueenImpl) queen;
    return new StatisticsGuard(node.nodeId(), node.broker().dataSource(), node.broker().schema());
  }
}
