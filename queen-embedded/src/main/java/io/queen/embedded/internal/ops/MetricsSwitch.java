package io.queen.embedded.internal.ops;

import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushResult;
import io.queen.embedded.internal.log.Metrics;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's {@link Metrics}: forwards to {@link Metrics#NOOP} until a Micrometer registry is given (to the
 * builder, or later through {@code QueenMeterBinder}), then to {@link MicrometerMetrics}, which sends every meter
 * to each registry bound. Thread-safe; one volatile read per call. A meter call that throws turns the metrics off
 * (logged once) instead of failing the work it reports on.
 */
public final class MetricsSwitch implements Metrics {
  private static final Logger LOG = LoggerFactory.getLogger(MetricsSwitch.class);
  private final String node;
  private volatile Metrics delegate;
  private volatile BooleanSupplier listener;
  private boolean closed;
  /** The builder's {@code meterTags}: on every meter, whenever the registry is bound. */
  private final List<String> commonTags;

  public MetricsSwitch(String node, Metrics initial) {
    this(node, initial, List.of());
  }

  public MetricsSwitch(String node, Metrics initial, List<String> commonTags) {
    this.node = node;
    this.delegate = initial;
    this.commonTags = List.copyOf(commonTags);
  }

  /** The Micrometer registry the node's meters go through (its common tags applied), or null when none is bound. */
  public Object registry() {
    return delegate instanceof MicrometerMetrics m ? m.registry() : null;
  }

  /**
   * A meter that fails (a Micrometer on the classpath without a method Queen calls, or a registry that throws) turns
   * the node's metrics off, said once: a push or an acknowledgement that already committed must not throw for it,
   * nor a consume loop stop.
   */
  private synchronized void off(Throwable e) {
    if (delegate == Metrics.NOOP) {
      return;
    }
    Metrics was = delegate;
    delegate = Metrics.NOOP;
    try {
      was.close(); // gauges left behind would show their last values for ever
    } catch (RuntimeException | LinkageError ignored) {
      // the registry is the one that failed; what it keeps is beyond reach
    }
    LOG.error("{} - a Micrometer call failed ({}: {}); this node's metrics are off. Queen is tested with micrometer-core 1.14 to"
        + " 1.17; check the version on the classpath", node, e.getClass().getName(), e.getMessage());
  }

  /** Sends the node's meters to {@code registry} (a Micrometer {@code MeterRegistry}) as well. */
  public synchronized void bind(Object registry) {
    if (closed) {
      return; // a closed node reports nothing
    }
    if (delegate instanceof MicrometerMetrics m) {
      m.add(registry);
      return;
    }
    MicrometerMetrics m = new MicrometerMetrics(registry, commonTags);
    BooleanSupplier l = listener;
    if (l != null) {
      m.bindListener(l);
    }
    delegate = m;
  }

  @Override
  public boolean enabled() {
    return delegate.enabled();
  }

  @Override
  public void pushed(List<PushResult> results) {
    try {
      delegate.pushed(results);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void delivered(String queue, String group, List<Message> messages) {
    try {
      delegate.delivered(queue, group, messages);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void acked(String queue, String group, List<AckResult> results) {
    try {
      delegate.acked(queue, group, results);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void handled(String queue, String group, long nanos, boolean ok) {
    try {
      delegate.handled(queue, group, nanos, ok);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void consumerOutcome(String queue, String group, String outcome, long n) {
    try {
      delegate.consumerOutcome(queue, group, outcome, n);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void consumerPop(String queue, String group, boolean empty) {
    try {
      delegate.consumerPop(queue, group, empty);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void deadLettered(String queue, String group, boolean kept) {
    try {
      delegate.deadLettered(queue, group, kept);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void markerStatement(boolean applied) {
    try {
      delegate.markerStatement(applied);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void pushesCombined(String queue, int calls) {
    try {
      delegate.pushesCombined(queue, calls);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void groupLag(String queue, String group, long lag, double pendingAgeSeconds, boolean alert) {
    try {
      delegate.groupLag(queue, group, lag, pendingAgeSeconds, alert);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void pushReceipts(long removed, long stored, double oldestAgeSeconds) {
    try {
      delegate.pushReceipts(removed, stored, oldestAgeSeconds);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void retentionRemoved(String queue, long n) {
    try {
      delegate.retentionRemoved(queue, n);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void partitionsRemoved(String queue, long n) {
    try {
      delegate.partitionsRemoved(queue, n);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void groupExpired(String queue) {
    try {
      delegate.groupExpired(queue);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void retentionLost(String queue, String group, long n) {
    try {
      delegate.retentionLost(queue, group, n);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void waitingForKey(String queue, long messages) {
    try {
      delegate.waitingForKey(queue, messages);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void retentionState(String queue, double oldestAgeSeconds, String heldBy) {
    try {
      delegate.retentionState(queue, oldestAgeSeconds, heldBy);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void horizonAge(double seconds) {
    try {
      delegate.horizonAge(seconds);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void groupGone(String queue, String group) {
    try {
      delegate.groupGone(queue, group);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public java.util.Set<String> queuesMetered() {
    try {
      return delegate.queuesMetered();
    } catch (RuntimeException | LinkageError e) {
      off(e);
      return java.util.Set.of();
    }
  }

  @Override
  public void queueDeleted(String queue) {
    try {
      delegate.queueDeleted(queue);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void groupDeleted(String queue, String group) {
    try {
      delegate.groupDeleted(queue, group);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public void retentionGone(String queue) {
    try {
      delegate.retentionGone(queue);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }

  @Override
  public synchronized void close() {
    closed = true;
    Metrics was = delegate;
    delegate = Metrics.NOOP;
    try {
      was.close();
    } catch (RuntimeException | LinkageError e) {
      LOG.warn("{} - the node's gauges could not be removed from the meter registry ({}: {})", node,
          e.getClass().getName(), e.getMessage());
    }
  }

  @Override
  public synchronized void bindListener(BooleanSupplier connected) {
    listener = connected;
    try {
      delegate.bindListener(connected);
    } catch (RuntimeException | LinkageError e) {
      off(e);
    }
  }
}
