package io.queen.embedded;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.queen.Queen;
import io.queen.embedded.internal.QueenImpl;
import java.util.Objects;

/**
 * Binds a started node's meters to a Micrometer registry, the Micrometer way ({@code new QueenMeterBinder(queen)
 * .bindTo(registry)}, or as a {@link MeterBinder} bean that a framework binds). Every meter of the node goes to
 * each registry bound, those registered already and those to come: the counters, timers and gauges listed in the
 * metrics table of {@code docs/operations.md}, tagged {@code queue}, {@code group} and {@code outcome} only. Using the
 * builder's {@code meterRegistry(...)} is the same as binding that registry at start. Needs micrometer-core on the
 * classpath (an optional dependency of queen-embedded). Thread-safe.
 */
public final class QueenMeterBinder implements MeterBinder {
  private final QueenImpl queen;

  /** A binder for {@code queen}, a node started by {@link EmbeddedQueen}. */
  public QueenMeterBinder(Queen queen) {
    Objects.requireNonNull(queen, "queen must not be null");
    if (!(queen instanceof QueenImpl q)) {
      throw new IllegalArgumentException("queen must be a node started by EmbeddedQueen, was "
          + queen.getClass().getName());
    }
    this.queen = q;
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    Objects.requireNonNull(registry, "registry must not be null");
    queen.metrics().bind(registry);
  }
}
