package io.queen.pgconn.internal.source;

import java.util.function.DoubleSupplier;
import java.util.function.LongSupplier;

/**
 * The source's meters (names as in the module README, tag {@code connector}): a no-op without a {@code MeterRegistry},
 * Micrometer otherwise ({@link MicrometerSourceMeters}, the only class of this package that touches Micrometer,
 * an optional dependency).
 */
public interface SourceMeters {
  /** The counters of one source. */
  interface Connector {
    void transactions(long n);

    void messages(long n);

    void bundle();

    void snapshotRows(long n);

    void error();
  }

  /** The gauges read from a running source: the two lags are NaN where this node does not know them. */
  record Gauges(DoubleSupplier slotLagBytes, LongSupplier pointerLsn, DoubleSupplier lagSeconds) {}

  Connector connector(String name, Gauges gauges);

  /** Removes the gauges of a deleted or stopped source. */
  void forget(String name);

  Connector NOOP_CONNECTOR = new Connector() {
    @Override
    public void transactions(long n) {}

    @Override
    public void messages(long n) {}

    @Override
    public void bundle() {}

    @Override
    public void snapshotRows(long n) {}

    @Override
    public void error() {}
  };

  SourceMeters NOOP = new SourceMeters() {
    @Override
    public Connector connector(String name, Gauges gauges) {
      return NOOP_CONNECTOR;
    }

    @Override
    public void forget(String name) {}
  };

  static SourceMeters of(Object registry) {
    if (registry == null) {
      return NOOP;
    }
    try {
      return new GuardedSourceMeters(new MicrometerSourceMeters(registry));
    } catch (LinkageError e) { // a Micrometer without a method the meters call: no meters, the connectors run
      org.slf4j.LoggerFactory.getLogger(GuardedSourceMeters.class).error("the connector meters are off: {}: {}",
          e.getClass().getName(), e.getMessage());
      return NOOP;
    }
  }
}
