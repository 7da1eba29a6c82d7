package io.queen.embedded.internal.consume;

import io.queen.BatchHandler;
import io.queen.ConsumerBuilder;
import io.queen.Message;
import io.queen.MessageHandler;
import io.queen.Names;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.TransactionalBatchHandler;
import io.queen.TransactionalHandler;
import io.queen.embedded.internal.log.Broker;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;

/** Pop and consume settings for one queue and group. */
public final class ConsumerBuilderImpl implements ConsumerBuilder {
  static final Duration MAX_WAIT = Duration.ofMinutes(5);
  static final Duration DEFAULT_GRACE = Duration.ofSeconds(10);

  private final ConsumerNode queen;
  private final String queue;
  private final String group;
  private int batch = DEFAULT_BATCH;
  private int partitions = 1;
  private boolean partitionsSet;
  private String partition;
  private Duration wait = Duration.ZERO;
  private SubscriptionMode mode;
  private Instant from;
  private boolean autoAck;
  private Duration leaseTime;
  private int concurrency = DEFAULT_CONCURRENCY;
  private Duration grace;

  public ConsumerBuilderImpl(ConsumerNode queen, String queue, String group) {
    this.queen = queen;
    this.queue = queue;
    this.group = group;
  }

  @Override
  public String queue() {
    return queue;
  }

  @Override
  public String group() {
    return group;
  }

  @Override
  public ConsumerBuilder batch(int n) {
    if (n < 1 || n > 10_000) {
      throw new IllegalArgumentException("batch must be 1..10000, was " + n);
    }
    batch = n;
    return this;
  }

  @Override
  public ConsumerBuilder partitions(int n) {
    if (n < 1 || n > 1000) {
      throw new IllegalArgumentException("partitions must be 1..1000, was " + n);
    }
    partitions = n;
    partitionsSet = true;
    return this;
  }

  @Override
  public ConsumerBuilder partition(String p) {
    partition = Names.partition(p);
    return this;
  }

  @Override
  public ConsumerBuilder waitFor(Duration w) {
    Objects.requireNonNull(w, "waitFor must not be null");
    if (w.isNegative() || w.compareTo(MAX_WAIT) > 0) {
      throw new IllegalArgumentException("waitFor must be between 0 and " + MAX_WAIT + ", was " + w);
    }
    wait = w;
    return this;
  }

  @Override
  public ConsumerBuilder subscription(SubscriptionMode m) {
    mode = Objects.requireNonNull(m, "mode must not be null");
    from = null;
    return this;
  }

  @Override
  public ConsumerBuilder subscriptionFrom(Instant f) {
    from = Objects.requireNonNull(f, "from must not be null");
    mode = null;
    return this;
  }

  @Override
  public ConsumerBuilder autoAck(boolean a) {
    autoAck = a;
    return this;
  }

  @Override
  public ConsumerBuilder leaseTime(Duration l) {
    Objects.requireNonNull(l, "leaseTime must not be null");
    if (l.compareTo(Duration.ofMillis(100)) < 0 || l.compareTo(Duration.ofDays(1)) > 0) {
      throw new IllegalArgumentException("leaseTime must be between PT0.1S and PT24H, was " + l);
    }
    leaseTime = l;
    return this;
  }

  @Override
  public ConsumerBuilder concurrency(int n) {
    if (n < 1 || n > 256) {
      throw new IllegalArgumentException("concurrency must be 1..256, was " + n);
    }
    concurrency = n;
    return this;
  }

  @Override
  public ConsumerBuilder gracePeriod(Duration g) {
    grace = SubscriptionImpl.checkGrace(g);
    return this;
  }

  private boolean ownedExpiryCounts = true;

  Broker.PopRequest request() {
    String m;
    if (Queen.DEFAULT_GROUP.equals(group)) {
      m = "ALL"; // the queue's own group reads everything
    } else if (from != null) {
      m = "FROM";
    } else {
      m = mode == SubscriptionMode.ALL ? "ALL" : "NEW";
    }
    return new Broker.PopRequest(queue, group, batch, partitions, partition, leaseTime, m, from, autoAck);
  }

  @Override
  public List<Message> pop() {
    queen.checkOpen();
    Broker.PopRequest r = request();
    long deadline = System.nanoTime() + wait.toNanos();
    while (true) {
      // a pop that may wait reads the queue's wake-up signal first (so a push between the pop and the wait is not
      // missed); one that may not leaves it alone: it would make a signal per queue name ever popped
      long seen = wait.isZero() ? 0 : queen.wakeups().version(queue);
      List<Message> got = queen.broker().pop(r);
      long left = deadline - System.nanoTime();
      if (!got.isEmpty() || left <= 0 || queen.isClosing()) {
        return got;
      }
      try {
        queen.wakeups().await(queue, seen, Duration.ofNanos(Math.min(left, queen.pollInterval().toNanos())));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return List.of();
      }
    }
  }

  @Override
  public Subscription consume(MessageHandler handler) {
    Objects.requireNonNull(handler, "handler must not be null");
    return start(handler, null, null, null);
  }

  @Override
  public Subscription consumeBatch(BatchHandler handler) {
    Objects.requireNonNull(handler, "handler must not be null");
    return start(null, handler, null, null);
  }

  @Override
  public Subscription consumeInTransaction(TransactionalHandler handler) {
    Objects.requireNonNull(handler, "handler must not be null");
    return start(null, null, handler, null);
  }

  @Override
  public Subscription consumeBatchInTransaction(TransactionalBatchHandler handler) {
    Objects.requireNonNull(handler, "handler must not be null");
    return start(null, null, null, handler);
  }

  /** For the connector SPI: a loop whose batch handler acknowledges by itself; threads named by {@code role}. */
  public Subscription consumeOwned(io.queen.embedded.spi.OwnedBatchHandler handler, String role) {
    return consumeOwned(handler, role, true);
  }

  /** As above; {@code expiryCounts} false: the group's expired leases are released without an attempt. */
  public Subscription consumeOwned(io.queen.embedded.spi.OwnedBatchHandler handler, String role, boolean expiryCounts) {
    Objects.requireNonNull(handler, "handler must not be null");
    this.ownedExpiryCounts = expiryCounts;
    return start(null, null, null, null, handler, role);
  }

  private Subscription start(MessageHandler one, BatchHandler many, TransactionalHandler txOne,
      TransactionalBatchHandler txMany) {
    return start(one, many, txOne, txMany, null, null);
  }

  private Subscription start(MessageHandler one, BatchHandler many, TransactionalHandler txOne,
      TransactionalBatchHandler txMany, io.queen.embedded.spi.OwnedBatchHandler owned, String role) {
    queen.checkOpen();
    if (autoAck) {
      throw new IllegalArgumentException("autoAck is for pop(); consume acknowledges after the handler returns");
    }
    Broker.PopRequest r = request();
    boolean exists = queen.broker().catalogue().queueExists(queue);
    if (!exists && "NEW".equals(r.mode())) {
      // everything a queue created later holds was pushed after this subscription began: read it all
      r = new Broker.PopRequest(r.queue(), r.group(), r.batch(), r.partitions(), r.partition(), r.leaseTime(), "ALL",
          r.from(), r.autoAck());
    }
    SubscriptionImpl s = new SubscriptionImpl(queen, r, partitionsSet ? partitions : 0, concurrency, grace != null ? grace
        : queen.closeGrace(), one, many, txOne, txMany, owned, role);
    if (!exists) {
      s.queueMissingAtStart();
    }
    if (owned != null && !ownedExpiryCounts) {
      s.expiryNotCounted();
    }
    queen.register(s);
    s.start();
    return s;
  }

  @Override
  public int seek(Instant time) {
    Objects.requireNonNull(time, "time must not be null");
    queen.checkOpen();
    return queen.broker().catalogue().seek(queue, group, "TIME", time);
  }

  @Override
  public int seekToEnd() {
    queen.checkOpen();
    return queen.broker().catalogue().seek(queue, group, "END", null);
  }

  @Override
  public int seekToBeginning() {
    queen.checkOpen();
    return queen.broker().catalogue().seek(queue, group, "BEGINNING", null);
  }

  @Override
  public void delete() {
    queen.checkOpen();
    queen.broker().catalogue().deleteGroup(queue, group);
  }
}
