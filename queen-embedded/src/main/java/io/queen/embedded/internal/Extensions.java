package io.queen.embedded.internal;

import io.queen.Kv;
import io.queen.embedded.internal.kv.KvImpl;
import io.queen.embedded.internal.kv.KvStore;
import io.queen.embedded.internal.kv.KvSweeper;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.JsonCodec;
import io.queen.embedded.internal.tx.TransactionImpl;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/** Wires the KV store, the transaction bundle and the janitor into a node. */
final class Extensions {
  /** How often the janitor runs a sweep round. */
  static final long JANITOR_PERIOD_MS = 5_000;

  private Extensions() {}

  static KvStore kvStore(QueenConfig config, JsonCodec codec) {
    return new KvStore(config.schema(), codec, config.kvMaxReadBytes());
  }

  /** The application's KV: refused once the node is closed ({@code checkOpen}). */
  static Kv kv(DataSource ds, KvStore store, Runnable checkOpen) {
    return new KvImpl(ds, store, checkOpen);
  }

  /**
   * The connectors' KV: the same store, refused only once the connector plugin is closed, so that during
   * {@code close()} a source can still give its ownership lease back (the application's KV is refused at once).
   */
  static Kv connectorKv(DataSource ds, KvStore store, Runnable checkConnectorsOpen) {
    return new KvImpl(ds, store, checkConnectorsOpen);
  }

  static TransactionImpl transaction(Broker broker, KvStore store, Runnable checkOpen, boolean forHandler) {
    return new TransactionImpl(broker, store, broker.pushes()::afterCommit, checkOpen, forHandler);
  }

  /** The janitor: expired KV rows, one node at a time (the sweeper takes an advisory lock per batch). */
  static void startJanitor(QueenConfig config, DataSource ds, ScheduledExecutorService scheduler) {
    if (!config.janitor()) {
      return;
    }
    KvSweeper sweeper = new KvSweeper(ds, config.schema(), config.nodeId());
    scheduler.scheduleWithFixedDelay(sweeper, JANITOR_PERIOD_MS, JANITOR_PERIOD_MS, TimeUnit.MILLISECONDS);
  }
}
