package io.queen.embedded.internal;

import io.queen.Kv;
import io.queen.embedded.internal.kv.KvImpl;
import io.queen.embedded.internal.kv.KvStore;
import io.queen.embedded.internal.kv.KvSweeper;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.JsonCodec;
import io.queen.embedded.internal.tx.TransactionImpl;
import io.queen.embedded.spi.ConnectorProvider;
import io.queen.embedded.spi.ConnectorSettings;
import java.util.Objects;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/** Wires the KV store, the transaction bundle, the janitor and the connector module into a node. */
final class Extensions {
  /** How often the janitor runs a sweep round. */
  static final long JANITOR_PERIOD_MS = 5_000;

  private Extensions() {}

  static KvStore kvStore(String schema, long kvMaxReadBytes, JsonCodec codec) {
    return new KvStore(schema, codec, kvMaxReadBytes);
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
  static void startJanitor(String schema, String nodeId, DataSource ds, ScheduledExecutorService scheduler) {
    KvSweeper sweeper = new KvSweeper(ds, schema, nodeId);
    scheduler.scheduleWithFixedDelay(sweeper, JANITOR_PERIOD_MS, JANITOR_PERIOD_MS, TimeUnit.MILLISECONDS);
  }

  /** The first {@link ConnectorProvider} on the classpath (queen-pgconn), or null. */
  static ConnectorProvider connectorProvider() {
    ClassLoader loader = Extensions.class.getClassLoader();
    for (ConnectorProvider p : java.util.ServiceLoader.load(ConnectorProvider.class, loader)) {
      return p;
    }
    return null;
  }

  /**
   * The settings the connector module runs with: those given, else its defaults; null without a module. Settings
   * given with no module on the classpath, or that the module does not read, are refused before anything starts.
   */
  static ConnectorSettings connectorSettings(ConnectorSettings given, ConnectorProvider provider) {
    if (provider == null) {
      if (given != null) {
        throw new IllegalArgumentException("connectors(" + given.getClass().getSimpleName() + ") was given, but no"
            + " connector module is on the classpath: add io.queen:queen-pgconn, or drop connectors(...)");
      }
      return null;
    }
    return Objects.requireNonNull(provider.settings(given), "the connector module's settings");
  }
}
