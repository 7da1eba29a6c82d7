package io.queen.embedded.internal.ops;

import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushResult;
import io.queen.embedded.internal.log.Metrics;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * The node's {@link Metrics}: forwards to {@link Metrics#NOOP} until a Micrometer registry is given (to the
 * builder, or later through {@code QueenMeterBinder}), then to {@link MicrometerMetrics}, which sends every meter
 * to each registry bound. Thread-safe; one volatile read per call.
 */
public final class MetricsSwitch implements Metrics {
  private volatile Metrics delegate;
  private volatile BooleanSupplier listener;

  public MetricsSwitch(Metrics initial) {
    this.delegate = initial;
  }

  /** Sends the node's meters to {@code registry} (a Micrometer {@code MeterRegistry}) as well. */
  public synchronized void bind(Object registry) {
    if (delegate instanceof MicrometerMetrics m) {
      m.add(registry);
      return;
    }
    MicrometerMetrics m = new MicrometerMetrics(registry);
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
    delegate.pushed(results);
  }

  @Override
  public void delivered(String queue, String group, List<Message> messages) {
    delegate.delivered(queue, group, messages);
  }

  @Override
  public void acked(String queue, String group, List<AckResult> results) {
    delegate.acked(queue, group, results);
  }

  @Override
  public void handled(String queue, String group, long nanos, boolean ok) {
    delegate.handled(queue, group, nanos, ok);
  }

  @Override
  public void consumerOutcome(String queue, String group, String outcome, long n) {
    delegate.consumerOutcome(queue, group, outcome, n);
  }

  @Override
  public void consumerPop(String queue, String group, boolean empty) {
    delegate.consumerPop(queue, group, empty);
  }

  @Override
  public void deadLettered(String queue, String group) {
    delegate.deadLettered(queue, group);
  }

  @Override
  public void markerStatement(boolean applied) {
    delegate.markerStatement(applied);
  }

  @Override
  public void pushesCombined(String queue, int calls) {
    delegate.pushesCombined(queue, calls);
  }

  @Override
  public void groupLag(String queue, String group, long lag, double pendingAgeSeconds, boolean alert) {
    delegate.groupLag(queue, group, lag, pendingAgeSeconds, alert);
  }

  @Override
  public void pushReceipts(long removed, long stored, double oldestAgeSeconds) {
    delegate.pushReceipts(removed, stored, oldestAgeSeconds);
  }

  @Override
  public void retentionRemoved(String queue, long n) {
    delegate.retentionRemoved(queue, n);
  }

  @Override
  public void retentionLost(String queue, String group, long n) {
    delegate.retentionLost(queue, group, n);
  }

  @Override
  public void retentionState(String queue, double oldestAgeSeconds, String heldBy) {
    delegate.retentionState(queue, oldestAgeSeconds, heldBy);
  }

  @Override
  public synchronized void bindListener(BooleanSupplier connected) {
    listener = connected;
    delegate.bindListener(connected);
  }
}
