package io.queen.pgconn.internal.sink;

import java.util.function.BooleanSupplier;

/**
 * The connector meters of one node (names as in the module README, tag {@code connector}): a no-op without a
 * {@code MeterRegistry}, Micrometer otherwise ({@link MicrometerSinkMeters}, the only class here that
 * touches Micrometer, which is an optional dependency).
 */
public interface SinkMeters {
  /** The meters of one connector. */
  interface Connector {
    void applied(long n);

    void skipped(long n);

    /** Events a cdc sink passed over: another source table's ({@code sourceTable}), a truncate without {@code truncates}. */
    void ignored(long n);

    void dlq(long n);

    void batch();

    void error();
  }

  Connector connector(String name);

  /** Registers {@code queen.pg.connector.owner} for {@code name}: 1 while {@code owns} says this node runs it. */
  void owner(String name, BooleanSupplier owns);

  /** Removes the owner gauge of a connector: the node closes (its counters stay, as counters do), or it is deleted. */
  void forget(String name);

  /**
   * A connector deleted, a sink or a source: every meter tagged with it goes, counters included (a connector put again
   * under that name starts them from zero), so connectors put and deleted under new names do not grow the
   * application's registry for the node's life. (The source's gauges go through {@code SourceMeters.forget} too.)
   */
  default void deleted(String name) {
    forget(name);
  }

  /** Removes every owner gauge this node registered (the node closes; the application's registry lives on). */
  void close();

  Connector NOOP_CONNECTOR = new Connector() {
    @Override
    public void applied(long n) {}

    @Override
    public void skipped(long n) {}

    @Override
    public void ignored(long n) {}

    @Override
    public void dlq(long n) {}

    @Override
    public void batch() {}

    @Override
    public void error() {}
  };

  SinkMeters NOOP = new SinkMeters() {
    @Override
    public Connector connector(String name) {
      return NOOP_CONNECTOR;
    }

    @Override
    public void owner(String name, BooleanSupplier owns) {}

    @Override
    public void forget(String name) {}

    @Override
    public void close() {}
  };

  static SinkMeters of(Object registry) {
    if (registry == null) {
      return NOOP;
    }
    try {
      return new GuardedSinkMeters(new MicrometerSinkMeters(registry));
    } catch (LinkageError e) { // a Micrometer without a method the meters call: no meters, the connectors run
      org.slf4j.LoggerFactory.getLogger(GuardedSinkMeters.class).error("the connector meters are off: {}: {}",
          e.getClass().getName(), e.getMessage());
      return NOOP;
    }
  }
}
