package io.queen.pgconn.internal.source;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The source metrics as Micrometer meters, dotted names that Prometheus naming renders with underscores:
 * counters {@code queen.pg.source.transactions} ({@code queen_pg_source_transactions_total}),
 * {@code queen.pg.source.messages}, {@code queen.pg.source.bundles}, {@code queen.pg.source.snapshot.rows},
 * {@code queen.pg.connector.errors}; gauges {@code queen.pg.source.slot.lag.bytes} (the server's current WAL
 * position minus the slot's {@code confirmed_flush_lsn}), {@code queen.pg.source.pointer.lsn} (the pointer as a
 * number) and {@code queen.pg.source.lag.seconds} (now minus the commit time of the last transaction pushed). Tag
 * {@code connector} only.
 */
final class MicrometerSourceMeters implements SourceMeters {
  private final MeterRegistry registry;
  private final Map<String, List<Gauge>> gauges = new ConcurrentHashMap<>();

  MicrometerSourceMeters(Object registry) {
    if (!(registry instanceof MeterRegistry r)) {
      throw new IllegalArgumentException("meterRegistry is not a Micrometer MeterRegistry: " + registry.getClass().getName());
    }
    this.registry = r;
  }

  private Counter counter(String name, String connector, String description) {
    return Counter.builder(name).tag("connector", connector).description(description).register(registry);
  }

  @Override
  public Connector connector(String name, Gauges g) {
    forget(name);
    gauges.put(name, List.of(
        Gauge.builder("queen.pg.source.slot.lag.bytes", () -> g.slotLagBytes().getAsDouble()).tag("connector", name)
            .description("current WAL position minus the slot's confirmed_flush_lsn").register(registry),
        Gauge.builder("queen.pg.source.pointer.lsn", () -> g.pointerLsn().getAsLong()).tag("connector", name)
            .description("the source's pointer (an LSN as a number)").register(registry),
        Gauge.builder("queen.pg.source.lag.seconds", () -> g.lagSeconds().getAsDouble()).tag("connector", name)
            .description("now minus the commit time of the last transaction pushed").register(registry)));
    Counter tx = counter("queen.pg.source.transactions", name, "source transactions pushed");
    Counter messages = counter("queen.pg.source.messages", name, "messages a source pushed");
    Counter bundles = counter("queen.pg.source.bundles", name, "Queen transactions a source committed");
    Counter rows = counter("queen.pg.source.snapshot.rows", name, "rows a source's snapshot pushed");
    Counter errors = counter("queen.pg.connector.errors", name, "failures of a connector");
    return new Connector() {
      @Override
      public void transactions(long n) {
        if (n > 0) {
          tx.increment(n);
        }
      }

      @Override
      public void messages(long n) {
        if (n > 0) {
          messages.increment(n);
        }
      }

      @Override
      public void bundle() {
        bundles.increment();
      }

      @Override
      public void snapshotRows(long n) {
        if (n > 0) {
          rows.increment(n);
        }
      }

      @Override
      public void error() {
        errors.increment();
      }
    };
  }

  @Override
  public void forget(String name) {
    List<Gauge> gs = gauges.remove(name);
    if (gs != null) {
      gs.forEach(registry::remove);
    }
  }
}
