package io.queen.pgconn.internal.sink;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;

/**
 * The sink metrics as Micrometer meters. Dotted names, which Micrometer's Prometheus naming
 * renders with underscores: counters {@code queen.pg.sink.applied} ({@code queen_pg_sink_applied_total}),
 * {@code queen.pg.sink.skipped}, {@code queen.pg.sink.dlq}, {@code queen.pg.sink.batches}, and ours,
 * {@code queen.pg.sink.ignored},
 * {@code queen.pg.connector.errors}; gauge {@code queen.pg.connector.owner} ({@code queen_pg_connector_owner}).
 * Tag {@code connector} only (low cardinality). Counters are looked up by name and tag, so a sink
 * restarted with a new document version keeps counting on the same series.
 */
final class MicrometerSinkMeters implements SinkMeters {
  private final MeterRegistry registry;
  private final Map<String, Gauge> owners = new ConcurrentHashMap<>();

  MicrometerSinkMeters(Object registry) {
    if (!(registry instanceof MeterRegistry r)) {
      throw new IllegalArgumentException("meterRegistry is not a Micrometer MeterRegistry: " + registry.getClass().getName());
    }
    this.registry = r;
  }

  private Counter counter(String name, String connector, String description) {
    return Counter.builder(name).tag("connector", connector).description(description).register(registry);
  }

  @Override
  public Connector connector(String name) {
    Counter applied = counter("queen.pg.sink.applied", name, "messages a sink wrote into its table");
    Counter skipped = counter("queen.pg.sink.skipped", name, "redeliveries a sink recognized and dropped");
    Counter ignored = counter("queen.pg.sink.ignored", name, "change events a cdc sink passed over (another"
        + " source table, a truncate it does not apply)");
    Counter dlq = counter("queen.pg.sink.dlq", name, "messages a sink dead-lettered");
    Counter batches = counter("queen.pg.sink.batches", name, "batches a sink committed");
    Counter errors = counter("queen.pg.connector.errors", name, "failures of a connector");
    return new Connector() {
      @Override
      public void applied(long n) {
        if (n > 0) {
          applied.increment(n);
        }
      }

      @Override
      public void skipped(long n) {
        if (n > 0) {
          skipped.increment(n);
        }
      }

      @Override
      public void ignored(long n) {
        if (n > 0) {
          ignored.increment(n);
        }
      }

      @Override
      public void dlq(long n) {
        if (n > 0) {
          dlq.increment(n);
        }
      }

      @Override
      public void batch() {
        batches.increment();
      }

      @Override
      public void error() {
        errors.increment();
      }
    };
  }

  @Override
  public void owner(String name, BooleanSupplier owns) {
    owners.computeIfAbsent(name, n -> Gauge.builder("queen.pg.connector.owner", () -> owns.getAsBoolean() ? 1 : 0)
        .tag("connector", n).description("1 on the node running the connector's work").register(registry));
  }

  @Override
  public void deleted(String name) {
    forget(name);
    for (io.micrometer.core.instrument.Meter m : List.copyOf(registry.getMeters())) {
      if (name.equals(m.getId().getTag("connector"))) {
        registry.remove(m);
      }
    }
  }

  @Override
  public void forget(String name) {
    Gauge g = owners.remove(name);
    if (g != null) {
      registry.remove(g);
    }
  }

  @Override
  public void close() {
    for (String name : Map.copyOf(owners).keySet()) {
      forget(name);
    }
  }
}
