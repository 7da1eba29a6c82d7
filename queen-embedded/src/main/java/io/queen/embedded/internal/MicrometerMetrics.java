package io.queen.embedded.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.Status;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Micrometer meters: counters {@code queen.messages.pushed|delivered|acked|failed|dead_lettered},
 * timers {@code queen.handler.duration} and {@code queen.delivery.latency} (push to delivery, database
 * clock at push against this JVM's clock at delivery), gauges {@code queen.group.lag} (messages) and
 * {@code queen.group.pending_age} (seconds), refreshed from a status snapshot every 10 s.
 */
final class MicrometerMetrics implements Metrics {
  private static final Logger LOG = LoggerFactory.getLogger(MicrometerMetrics.class);
  static final long GAUGE_PERIOD_MS = 10_000;

  private final MeterRegistry registry;
  private final Map<String, AtomicLong> gauges = new ConcurrentHashMap<>();

  MicrometerMetrics(Object registry) {
    this.registry = (MeterRegistry) registry;
  }

  private Counter counter(String name, String queue, String group) {
    Tags tags = group == null ? Tags.of("queue", queue) : Tags.of("queue", queue, "group", group);
    return registry.counter(name, tags);
  }

  @Override
  public void markerStatement(boolean applied) {
    registry.counter("queen.transactions.marker_statement", "outcome", applied ? "applied" : "fallback").increment();
  }

  @Override
  public void pushed(List<PushResult> results) {
    for (PushResult r : results) {
      if (r.status() == PushStatus.QUEUED) {
        counter("queen.messages.pushed", r.queue(), null).increment();
      }
    }
  }

  @Override
  public void delivered(String queue, String group, List<Message> messages) {
    if (messages.isEmpty()) {
      return;
    }
    counter("queen.messages.delivered", queue, group).increment(messages.size());
    Timer latency = Timer.builder("queen.delivery.latency").tags("queue", queue, "group", group).register(registry);
    Instant now = Instant.now();
    for (Message m : messages) {
      long ms = Duration.between(m.createdAt(), now).toMillis();
      latency.record(Math.max(0, ms), TimeUnit.MILLISECONDS);
    }
  }

  @Override
  public void acked(String queue, String group, List<AckResult> results) {
    for (AckResult r : results) {
      switch (r.outcome()) {
        case ACKED -> counter("queen.messages.acked", queue, group).increment();
        case RETRY_SCHEDULED -> counter("queen.messages.failed", queue, group).increment();
        case DEAD_LETTERED -> { } // counted by deadLettered(), from the database's report, which also sees expired leases
        case LEASE_LOST -> counter("queen.acks.lease_lost", queue, group).increment();
        case REDELIVER -> counter("queen.acks.redeliver", queue, group).increment();
      }
    }
  }

  @Override
  public void consumerOutcome(String queue, String group, String outcome, long n) {
    Counter.builder("queen.consumer.outcomes").tags("queue", queue, "group", group, "outcome", outcome)
        .register(registry).increment(n);
  }

  @Override
  public void consumerPop(String queue, String group, boolean empty) {
    Counter.builder("queen.consumer.pops").tags("queue", queue, "group", group, "outcome", empty ? "empty" : "messages")
        .register(registry).increment();
  }

  @Override
  public void deadLettered(String queue, String group) {
    counter("queen.messages.dead_lettered", queue, group).increment();
  }

  @Override
  public void handled(String queue, String group, long nanos, boolean ok) {
    Timer.builder("queen.handler.duration").tags("queue", queue, "group", group, "outcome", ok ? "ok" : "error")
        .register(registry).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void bindStatus(QueenImpl queen) {
    queen.scheduler().scheduleWithFixedDelay(() -> refresh(queen), 0, GAUGE_PERIOD_MS, TimeUnit.MILLISECONDS);
  }

  private void refresh(QueenImpl queen) {
    try {
      Status st = queen.status();
      for (Status.QueueStatus q : st.queues()) {
        for (Status.GroupStatus g : q.groups()) {
          gauge("queen.group.lag", q.name(), g.name()).set(g.lag());
          gauge("queen.group.pending_age", q.name(), g.name()).set(g.pendingAge().toSeconds());
        }
      }
    } catch (RuntimeException e) {
      LOG.debug("{} - metrics refresh failed: {}", queen.nodeId(), Sql.describe(e));
    }
  }

  private AtomicLong gauge(String name, String queue, String group) {
    return gauges.computeIfAbsent(name + '\u0000' + queue + '\u0000' + group, k -> {
      AtomicLong v = new AtomicLong();
      Gauge.builder(name, v, AtomicLong::doubleValue).tags("queue", queue, "group", group).register(registry);
      return v;
    });
  }
}
