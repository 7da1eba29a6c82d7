package io.queen.pgconn.internal.sink;

import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Micrometer meters behind a guard: a registration that throws (a registry that refuses a meter, a Micrometer
 * without a method called here) turns the connector meters off with one ERROR line, instead of failing the
 * registry's re-read and keeping every sink from starting.
 */
final class GuardedSinkMeters implements SinkMeters {
  private static final Logger LOG = LoggerFactory.getLogger(GuardedSinkMeters.class);
  private volatile SinkMeters delegate;

  GuardedSinkMeters(SinkMeters delegate) {
    this.delegate = delegate;
  }

  private void off(Throwable e) {
    if (delegate != NOOP) {
      delegate = NOOP;
      LOG.error("a Micrometer call for the sink meters failed ({}: {}); the connector meters are off", e.getClass()
          .getName(), e.getMessage());
    }
  }

  @Override
  public Connector connector(String name) {
    try {
      return delegate.connector(name);
    } catch (RuntimeException | LinkageError e) {
      off(e);
      return NOOP_CONNECTOR;
    }
  }

  @Override
  public void owner(String name, BooleanSupplier owns) {
    try {
      delegate.owner(name, owns);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void deleted(String name) {
    try {
      delegate.deleted(name);
    } catch (RuntimeException | LinkageError e) {
      off(e);
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

  @Override
  public void close() {
    try {
      delegate.close();
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }
}
