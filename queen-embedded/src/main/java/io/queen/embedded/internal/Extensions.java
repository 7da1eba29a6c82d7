package io.queen.embedded.internal;

import io.queen.Kv;
import io.queen.Transaction;
import io.queen.embedded.internal.kv.KvImpl;
import io.queen.embedded.internal.kv.KvStore;
import io.queen.embedded.internal.kv.KvSweeper;
import io.queen.embedded.internal.tx.TransactionImpl;
import java.util.concurrent.TimeUnit;

/** Wires the KV store, the transaction bundle and the janitor into a node. */
final class Extensions {
  /** How often the janitor runs a sweep round. */
  static final long JANITOR_PERIOD_MS = 5_000;

  private Extensions() {}

  static KvStore kvStore(QueenImpl q) {
    return new KvStore(q.config().schema(), q.codec(), q.config().kvMaxReadBytes());
  }

  static Kv kv(QueenImpl q, KvStore store) {
    return new KvImpl(q.dataSource(), store, q::checkOpen);
  }

  /**
   * The connectors' KV: the same store, refused only once the connector plugin is closed, so that during
   * {@code close()} a source can still give its ownership lease back (the application's KV is refused at once).
   */
  static Kv connectorKv(QueenImpl q, KvStore store) {
    return new KvImpl(q.dataSource(), store, q::checkConnectorsOpen);
  }

  static TransactionImpl transaction(QueenImpl q, KvStore store, boolean forHandler) {
    return new TransactionImpl(q.broker(), store, q.broker().pushes()::afterCommit, q::checkOpen, forHandler);
  }

  /** The janitor: expired KV rows, one node at a time (the sweeper takes an advisory lock per batch). */
  static void startJanitor(QueenImpl q) {
    if (!q.config().janitor()) {
      return;
    }
    KvSweeper sweeper = new KvSweeper(q.dataSource(), q.config().schema(), q.nodeId());
    q.scheduler().scheduleWithFixedDelay(sweeper, JANITOR_PERIOD_MS, JANITOR_PERIOD_MS, TimeUnit.MILLISECONDS);
  }
}
