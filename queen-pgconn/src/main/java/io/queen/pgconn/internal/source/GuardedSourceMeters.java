package io.queen.pgconn.internal.source;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Micrometer meters behind a guard: a registration that throws turns the source meters off with one ERROR
 * line, instead of keeping the source from starting.
 */
final class GuardedSourceMeters implements SourceMeters {
  private static final Logger LOG = LoggerFactory.getLogger(GuardedSourceMeters.class);
  private volatile SourceMeters delegate;

  GuardedSourceMeters(SourceMeters delegate) {
    this.delegate = delegate;
  }

  private void off(Throwable e) {
    if (delegate != NOOP) {
      delegate = NOOP;
      LOG.error("a Micrometer call for the source meters failed ({}: {}); the source meters are off", e.getClass()
          .getName(), e.getMessage());
    }
  }

  @Override
  public Connector connector(String name, Gauges gauges) {
    try {
      return delegate.connector(name, gauges);
    } catch (RuntimeException | LinkageError e) {
      off(e);
      return NOOP_CONNECTOR;
    }
  }

  @Override
  public void forget(String name) {
    try {
      delegate.forget(name);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }
}
