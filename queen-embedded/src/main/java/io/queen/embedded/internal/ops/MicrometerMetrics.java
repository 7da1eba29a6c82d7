package io.queen.embedded.internal.ops;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.queen.AckResult;
import io.queen.Message;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.embedded.internal.log.Metrics;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * Micrometer meters (the table in docs/operations.md lists them all): counters
 * {@code queen.messages.pushed|delivered|acked|failed|dead_lettered}, timers {@code queen.handler.duration} and
 * {@code queen.delivery.latency} (push to delivery, database clock at push against this JVM's clock at delivery),
 * per-group gauges {@code queen.group.lag} (messages), {@code queen.group.pending.age} (seconds) and
 * {@code queen.group.pending.alert} (0/1) and the per-queue gauge {@code queen.messages.waiting_for_key} (messages),
 * refreshed by {@link GroupWatch}, retention meters and the listener gauge.
 */
public final class MicrometerMetrics implements Metrics {

  private final CompositeMeterRegistry registry = new CompositeMeterRegistry();
  /** The gauges this node registered, by name, queue and group: removed when their group or queue goes, or at close. */
  private final Map<String, Held> gauges = new ConcurrentHashMap<>();
  private volatile Gauge listenerGauge;
  /** Set by {@link #close()} before it removes the gauges: one registered by a janitor pass running meanwhile goes too. */
  private volatile boolean closed;

  /** Meters that go to {@code registry} (a Micrometer {@code MeterRegistry}) and to any added later. */
  public MicrometerMetrics(Object registry) {
    this(registry, List.of());
  }

  /**
   * The same, every meter carrying {@code commonTags} (key/value pairs, the builder's {@code meterTags}): the tags
   * are this composite's, since Micrometer registers a nested composite's meters into its children directly.
   */
  public MicrometerMetrics(Object registry, List<String> commonTags) {
    if (!commonTags.isEmpty()) {
      this.registry.config().commonTags(commonTags.toArray(String[]::new));
    }
    add(registry);
  }

  /** The node's composite: what connectors register with, so their meters carry the common tags too. */
  public Object registry() {
    return registry;
  }

  /** Sends every meter, those registered already and those to come, to this registry too. */
  void add(Object registry) {
    this.registry.add((MeterRegistry) registry);
  }

  private Counter counter(String name, String queue, String group) {
    // as an Iterable: counter(String, Tags) is new in micrometer 1.16 and would bind here, failing on older ones
    Iterable<Tag> tags = group == null ? Tags.of("queue", queue) : Tags.of("queue", queue, "group", group);
    return registry.counter(name, tags);
  }

  @Override
  public void markerStatement(boolean applied) {
    registry.counter("queen.transactions.marker_statement", "outcome", applied ? "applied" : "fallback").increment();
  }

  @Override
  public void pushesCombined(String queue, int calls) {
    counter("queen.pushes.combined", queue, null).increment(calls);
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
  public void deadLettered(String queue, String group, boolean kept) {
    counter(kept ? "queen.messages.dead_lettered" : "queen.messages.dropped", queue, group).increment();
  }

  @Override
  public void handled(String queue, String group, long nanos, boolean ok) {
    Timer.builder("queen.handler.duration").tags("queue", queue, "group", group, "outcome", ok ? "ok" : "error")
        .register(registry).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void groupLag(String queue, String group, long lag, double pendingAgeSeconds, boolean alert) {
    gauge("queen.group.lag", queue, group, BaseUnits.MESSAGES).set(lag);
    gauge("queen.group.pending.age", queue, group, "seconds").set(pendingAgeSeconds);
    gauge("queen.group.pending.alert", queue, group, null).set(alert ? 1 : 0);
  }

  @Override
  public void pushReceipts(long removed, long stored, double oldestAgeSeconds) {
    registry.counter("queen.push.receipts.removed").increment(removed);
    nodeGauge("queen.push.receipts", "receipts", "push receipts kept for de-duplication (an estimate)").set(stored);
    nodeGauge("queen.push.receipts.oldest.age", "seconds", "age of the oldest push receipt kept")
        .set(oldestAgeSeconds);
  }

  private AtomicDouble nodeGauge(String name, String unit, String description) {
    AtomicDouble v = gauges.computeIfAbsent(name, k -> {
      AtomicDouble d = new AtomicDouble();
      return new Held(d, Gauge.builder(name, d, AtomicDouble::get).baseUnit(unit).description(description)
          .register(registry));
    }).value;
    if (closed) {
      remove(name);
    }
    return v;
  }

  @Override
  public void retentionRemoved(String queue, long n) {
    registry.counter("queen.retention.removed", "queue", queue).increment(n);
  }

  @Override
  public void partitionsRemoved(String queue, long n) {
    registry.counter("queen.retention.partitions.removed", "queue", queue).increment(n);
  }

  @Override
  public void groupExpired(String queue) {
    registry.counter("queen.groups.expired", "queue", queue).increment();
  }

  @Override
  public void retentionLost(String queue, String group, long n) {
    counter("queen.retention.lost", queue, group).increment(n);
  }

  @Override
  public void waitingForKey(String queue, long messages) {
    gauge("queen.messages.waiting_for_key", queue, null, BaseUnits.MESSAGES).set(messages);
  }

  @Override
  public void retentionState(String queue, double oldestAgeSeconds, String heldBy) {
    gauge("queen.retention.oldest.age", queue, null, "seconds").set(oldestAgeSeconds);
    // one gauge per group that ever held the queue back: 1 for the one holding it now, 0 for the others
    for (Map.Entry<String, Held> e : gauges.entrySet()) {
      if (e.getKey().startsWith("queen.retention.holding\u0000" + queue + "\u0000")) {
        e.getValue().value.set(0);
      }
    }
    if (heldBy != null) {
      gauge("queen.retention.holding", queue, heldBy, null).set(1);
    }
  }

  @Override
  public void bindListener(BooleanSupplier connected) {
    listenerGauge = Gauge.builder("queen.listener.connected", connected, b -> b.getAsBoolean() ? 1 : 0)
        .description("1 while the node's wake-up listener holds its LISTEN connection").register(registry);
  }

  @Override
  public void horizonAge(double seconds) {
    nodeGauge("queen.database.horizon.age", "seconds",
        "how long the oldest open transaction this node can see has held the database's xmin horizon").set(seconds);
  }

  @Override
  public void groupGone(String queue, String group) {
    for (String name : List.of("queen.group.lag", "queen.group.pending.age", "queen.group.pending.alert",
        "queen.retention.holding")) {
      remove(name + '\u0000' + queue + '\u0000' + group);
    }
  }

  @Override
  public void queueDeleted(String queue) {
    removeTagged(queue, null);
  }

  @Override
  public void groupDeleted(String queue, String group) {
    removeTagged(queue, group);
  }

  @Override
  public java.util.Set<String> queuesMetered() {
    java.util.Set<String> out = new java.util.HashSet<>();
    for (String key : gauges.keySet()) {
      String[] k = key.split("\u0000", -1); // name, queue, group
      if (k.length == 3 && !k[1].equals("null")) {
        out.add(k[1]);
      }
    }
    for (io.micrometer.core.instrument.Meter m : registry.getMeters()) {
      String q = m.getId().getTag("queue");
      if (q != null && m.getId().getName().startsWith("queen.")) {
        out.add(q);
      }
    }
    return out;
  }

  /** Removes every meter tagged {@code queue} (and {@code group}, when given): gauges, counters, timers. */
  private void removeTagged(String queue, String group) {
    for (String key : List.copyOf(gauges.keySet())) {
      String[] k = key.split("\u0000", -1); // name, queue, group
      if (k.length == 3 && k[1].equals(queue) && (group == null || k[2].equals(group))) {
        remove(key);
      }
    }
    for (io.micrometer.core.instrument.Meter m : List.copyOf(registry.getMeters())) {
      if (queue.equals(m.getId().getTag("queue")) && (group == null || group.equals(m.getId().getTag("group")))) {
        registry.remove(m);
      }
    }
  }

  @Override
  public void retentionGone(String queue) {
    remove("queen.retention.oldest.age\u0000" + queue + "\u0000null");
    for (String key : List.copyOf(gauges.keySet())) {
      if (key.startsWith("queen.retention.holding\u0000" + queue + "\u0000")) {
        remove(key);
      }
    }
  }

  @Override
  public void close() {
    closed = true;
    for (String key : List.copyOf(gauges.keySet())) {
      remove(key);
    }
    Gauge l = listenerGauge;
    if (l != null) {
      registry.remove(l);
    }
  }

  private void remove(String key) {
    Held h = gauges.remove(key);
    if (h != null) {
      registry.remove(h.gauge); // from every registry bound: a composite's removal reaches them
    }
  }

  private AtomicDouble gauge(String name, String queue, String group, String unit) {
    String key = name + '\u0000' + queue + '\u0000' + group;
    AtomicDouble v = gauges.computeIfAbsent(key, k -> {
      AtomicDouble d = new AtomicDouble();
      Iterable<Tag> tags = group == null ? Tags.of("queue", queue) : Tags.of("queue", queue, "group", group);
      return new Held(d, Gauge.builder(name, d, AtomicDouble::get).tags(tags).baseUnit(unit).register(registry));
    }).value;
    if (closed) {
      remove(key);
    }
    return v;
  }

  /** A gauge's value and the gauge, which its removal needs. */
  private record Held(AtomicDouble value, Gauge gauge) {}

  /** A double a gauge reads; written by one janitor thread. */
  private static final class AtomicDouble {
    private volatile double value;

    double get() {
      return value;
    }

    void set(double v) {
      value = v;
    }
  }
}
