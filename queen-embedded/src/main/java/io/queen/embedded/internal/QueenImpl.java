package io.queen.embedded.internal;

import com.zaxxer.hikari.HikariDataSource;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.BrokerClosedException;
import io.queen.DeadLetters;
import io.queen.Kv;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.QueueClient;
import io.queen.Status;
import io.queen.Transaction;
import io.queen.embedded.internal.consume.ConsumerNode;
import io.queen.embedded.internal.consume.RunningSubscription;
import io.queen.embedded.internal.config.HousekeepingConfig;
import io.queen.embedded.internal.config.QueenConfig;
import io.queen.embedded.internal.db.Migrator;
import io.queen.embedded.internal.db.Pools;
import io.queen.embedded.internal.db.ReadCommitted;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.tx.TransactionImpl;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.JsonCodec;
import io.queen.embedded.internal.log.Metrics;
import io.queen.embedded.internal.log.PayloadCipher;
import io.queen.embedded.internal.log.PushReceipts;
import io.queen.embedded.internal.log.Wakeups;
import io.queen.embedded.internal.ops.GroupWatch;
import io.queen.embedded.internal.ops.HorizonWatch;
import io.queen.embedded.internal.ops.IdleGroups;
import io.queen.embedded.internal.ops.Liveness;
import io.queen.embedded.internal.ops.MetricsSwitch;
import io.queen.embedded.internal.ops.MicrometerMetrics;
import io.queen.embedded.internal.ops.RetentionJanitor;
import io.queen.embedded.internal.ops.StatisticsGuard;
import io.queen.embedded.internal.ops.StatusReader;
import io.queen.embedded.spi.ConnectorPlugin;
import io.queen.embedded.spi.ConnectorProvider;
import io.queen.embedded.spi.SchemaModule;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** One started node. */
public final class QueenImpl implements Queen, ConsumerNode {
  private static final Logger LOG = LoggerFactory.getLogger(QueenImpl.class);

  private final QueenConfig config;
  private final DataSource ds;
  private final HikariDataSource ownPool;
  private final Wakeups wakeups;
  private final Metrics metrics;
  private final Broker broker;
  private final StatusReader status;
  private final ScheduledExecutorService scheduler;
  private final Set<RunningSubscription> subscriptions = ConcurrentHashMap.newKeySet();
  /** Set when {@link #close()} starts: no new subscription starts, waiting pops return. */
  private final AtomicBoolean closing = new AtomicBoolean();
  /**
   * Set once the subscriptions and connectors have stopped (their handlers' grace periods are over): from then
   * on every call that does work throws. Until then a handler finishing in its grace period may still push,
   * commit its transaction and write KV, so its work counts instead of failing on a closed node.
   */
  private volatile boolean closed;
  /** The HTTP surface and dashboard, when the builder asked for them; closed first by {@link #close()}. */
  private volatile io.queen.embedded.internal.http.HttpSurface http;
  private final AtomicInteger threadCount = new AtomicInteger();
  private final io.queen.embedded.internal.kv.KvStore kvStore;
  private final Kv kv;
  /** The connectors' KV ({@link ConnectorHostImpl#kv()}): it answers until the connector plugin is closed. */
  private final Kv connectorKv;
  /** Set once {@link #close()} has closed the connector plugin (or found none). */
  private volatile boolean connectorsClosed;
  private final Liveness liveness;
  private final ScheduledExecutorService janitor;
  private final RetentionJanitor retention;
  private final GroupWatch groupWatch;
  private final IdleGroups idleGroups;
  private final HorizonWatch horizonWatch;
  private final StatisticsGuard statisticsGuard;
  /** The connector runtime found on the classpath (queen-pgconn), or null. */
  private volatile ConnectorPlugin connectors;

  private QueenImpl(QueenConfig config, DataSource ds, HikariDataSource ownPool) {
    this.config = config;
    this.ds = ds;
    this.ownPool = ownPool;
    String schema = config.connection().schema();
    String nodeId = config.nodeId();
    JsonCodec codec = new JsonCodec(config.payload().mapper());
    this.wakeups = new Wakeups(ds, schema, nodeId, (role, r) -> newDaemon(role, r));
    List<String> tags = config.metrics().tags();
    this.metrics = new MetricsSwitch(nodeId, config.metrics().registry() == null ? Metrics.NOOP
        : new MicrometerMetrics(config.metrics().registry(), tags), tags);
    this.broker = new Broker(ds, schema, codec, nodeId, wakeups, metrics, config.payload().maxPayloadBytes(),
        config.connection().connectTimeout(), config.payload().payloadTypes(),
        new PayloadCipher(config.encryption().key(), config.encryption().oldKeys()));
    this.status = new StatusReader(ds, broker.schema(), broker.cipher().ids());
    this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> newDaemon("scheduler", r));
    this.kvStore = Extensions.kvStore(schema, config.payload().kvMaxReadBytes(), codec);
    this.kv = Extensions.kv(ds, kvStore, this::checkOpen);
    this.connectorKv = Extensions.connectorKv(ds, kvStore, this::checkConnectorsOpen);
    this.liveness = new Liveness(ds, broker.schema(), nodeId, config.node().sessionTimeout(),
        config.node().heartbeatInterval());
    // retention passes and the group gauges get a thread of their own: the scheduler renews leases and must not wait
    this.janitor = Executors.newSingleThreadScheduledExecutor(r -> newDaemon("janitor", r));
    HousekeepingConfig housekeeping = config.housekeeping();
    this.retention = new RetentionJanitor(nodeId, ds, broker.schema(), metrics,
        housekeeping.removeEmptyPartitionsAfter());
    this.groupWatch = new GroupWatch(nodeId, ds, broker.schema(), status, metrics, broker.catalogue());
    this.idleGroups = new IdleGroups(nodeId, ds, broker.schema(), broker, housekeeping.groupIdleExpiry());
    this.horizonWatch = new HorizonWatch(nodeId, ds, metrics, housekeeping.horizonWarnAfter());
    this.statisticsGuard = new StatisticsGuard(config.nodeId(), ds, broker.schema());
  }

  /** How often the janitor removes the rows of nodes whose heartbeat stopped more than a day ago. */
  static final long FORGET_NODES_PERIOD_MS = 60_000;

  /** How long {@link #close()} lets the statement that gives back this node's leases run. */
  static final long RELEASE_ON_CLOSE_TIMEOUT_MS = 2_000;

  /** Validated config in; a started node out. */
  public static Queen start(QueenConfig given) {
    ConnectorProvider provider = Extensions.connectorProvider();
    QueenConfig config = given.withConnectors(Extensions.connectorSettings(given.connectors(), provider));
    String nodeId = config.nodeId();
    HikariDataSource own = null;
    DataSource ds = config.connection().dataSource();
    if (ds == null) {
      own = Pools.open(config.connection(), nodeId);
      ds = own;
    } else {
      Pools.checkSize(ds, nodeId, config.node().listen());
      ds = ReadCommitted.ensure(ds, nodeId); // the application's pool may default to a stricter level
    }
    QueenImpl started = null;
    try {
      List<SchemaModule> modules = new ArrayList<>(List.of(Migrator.CORE));
      if (provider != null) {
        modules.addAll(provider.schema());
      }
      Migrator.migrate(ds, config.connection().schema(), modules);
      QueenImpl q = new QueenImpl(config, ds, own);
      started = q;
      // before anything runs: a node whose key is not one of the cluster's must not start
      q.broker.keys().onStart(config.encryption().adopt());
      q.liveness.register(); // refuses an id a live node holds; takes over a dead one's leases
      q.liveness.onOthersAlive(q.wakeups::othersAlive);
      q.liveness.start((role, r) -> q.newDaemon(role, r));
      if (config.node().listen()) {
        q.wakeups.startListener();
      }
      q.wakeups.startNotifier();
      boolean janitor = config.housekeeping().janitor();
      if (janitor) {
        Extensions.startJanitor(config.connection().schema(), nodeId, q.ds, q.scheduler);
        q.scheduler.scheduleWithFixedDelay(q::forgetOldNodes, 1_000, FORGET_NODES_PERIOD_MS, TimeUnit.MILLISECONDS);
        q.janitor.scheduleWithFixedDelay(q::forgetOldReceipts, 5_000, FORGET_RECEIPTS_PERIOD_MS, TimeUnit.MILLISECONDS);
      }
      q.metrics.bindListener(q.wakeups::connected);
      q.janitor.scheduleWithFixedDelay(q.groupWatch, 0, GroupWatch.PERIOD_MS, TimeUnit.MILLISECONDS);
      q.janitor.scheduleWithFixedDelay(() -> q.quietly("group activity", q.idleGroups::record), GroupWatch.PERIOD_MS,
          GroupWatch.PERIOD_MS, TimeUnit.MILLISECONDS);
      q.janitor.scheduleWithFixedDelay(q.horizonWatch, HorizonWatch.PERIOD_MS / 2, HorizonWatch.PERIOD_MS,
          TimeUnit.MILLISECONDS);
      if (janitor) {
        // at a fixed rate: a pass that takes longer than the period (more to remove than the janitor's paced share
        // of the server clears in one) is followed by the next at once, so removal keeps level with ingest
        q.janitor.scheduleAtFixedRate(q.retention::runQuietly, RetentionJanitor.PERIOD_MS / 3,
            RetentionJanitor.PERIOD_MS, TimeUnit.MILLISECONDS);
        q.janitor.scheduleWithFixedDelay(q.statisticsGuard, StatisticsGuard.PERIOD_MS / 2, StatisticsGuard.PERIOD_MS,
            TimeUnit.MILLISECONDS);
        q.janitor.scheduleWithFixedDelay(() -> q.quietly("idle group expiry", q.idleGroups::expire),
            RetentionJanitor.PERIOD_MS, RetentionJanitor.PERIOD_MS, TimeUnit.MILLISECONDS);
      }
      if (provider != null) {
        q.connectors = provider.start(new ConnectorHostImpl(q, config.connection().schema(), config.node(),
            config.payload().payloadTypes(), config.encryption(), config.connectors(), q, q.connectorKv, q.metrics()));
      }
      if (config.http() != null) {
        q.http = io.queen.embedded.internal.http.HttpSurface.start(config.http(), q, r -> q.newDaemon("http", r),
            q::databaseReachable, config.metrics().registry());
      }
      LOG.info("{} - Queen {} started: {}", nodeId, Queen.version(), config.describe());
      if (config.connection().dataSource() != null) {
        Pools.warnIfUnpooled(config.connection().dataSource(), nodeId);
      }
      return q;
    } catch (RuntimeException e) {
      if (started != null) {
        if (started.http != null) {
          started.http.close();
        }
        if (started.connectors != null) {
          started.connectors.close();
        }
        started.scheduler.shutdownNow();
        started.janitor.shutdownNow();
        started.wakeups.close();
        started.liveness.close();
      }
      if (own != null) {
        own.close();
      }
      throw e;
    }
  }

  /** How often the janitor removes push receipts older than the node's pushReceiptRetention. */
  static final long FORGET_RECEIPTS_PERIOD_MS = 60_000;

  /** Removes old push receipts (at most 100 chunks a pass; the next pass goes on); never throws. */
  public void forgetOldReceipts() {
    try {
      long n = PushReceipts.forgetOldReceipts(ds, broker.schema(),
          config.housekeeping().pushReceiptRetention(), 100);
      if (n > 0) {
        LOG.debug("{} - removed {} push receipt(s) older than {}", config.nodeId(), n,
            config.housekeeping().pushReceiptRetention());
      }
      if (metrics.enabled()) {
        PushReceipts.ReceiptsLeft left = PushReceipts.receiptsLeft(ds, broker.schema());
        metrics.pushReceipts(n, left.rows(), left.oldestAgeSeconds());
      }
    } catch (RuntimeException e) {
      LOG.debug("{} - could not remove old push receipts ({})", config.nodeId(), Sql.describe(e));
    }
  }

  private void forgetOldNodes() {
    try {
      int n = Liveness.forgetOldNodes(ds, broker.schema());
      if (n > 0) {
        LOG.info("{} - removed {} row(s) of nodes whose heartbeat stopped more than {} ago", config.nodeId(), n,
            Liveness.FORGET_AFTER);
      }
    } catch (RuntimeException e) {
      LOG.debug("{} - could not remove old node rows ({})", config.nodeId(), Sql.describe(e));
    }
  }

  // ------------------------------------------------------------------------------ internal access

  public QueenConfig config() {
    return config;
  }

  @Override
  public Duration pollInterval() {
    return config.node().pollInterval();
  }

  @Override
  public Duration closeGrace() {
    return config.node().closeGrace();
  }

  @Override
  public Broker broker() {
    return broker;
  }

  @Override
  public Wakeups wakeups() {
    return wakeups;
  }

  @Override
  public ScheduledExecutorService scheduler() {
    return scheduler;
  }

  /** True once {@link #close()} has started. */
  @Override
  public boolean isClosing() {
    return closing.get();
  }

  @Override
  public void checkOpen() {
    if (closed) {
      throw new BrokerClosedException("Queen node " + config.nodeId());
    }
  }

  /** The guard of the connectors' KV: it refuses only once the connector plugin is closed. */
  void checkConnectorsOpen() {
    if (connectorsClosed) {
      throw new BrokerClosedException("Queen node " + config.nodeId());
    }
  }

  @Override
  public void register(RunningSubscription s) {
    subscriptions.add(s);
    if (closing.get()) {
      s.close(Duration.ZERO);
    }
  }

  @Override
  public void unregister(RunningSubscription s) {
    subscriptions.remove(s);
  }

  /** The address the HTTP surface listens on, or null when the builder did not ask for it. */
  public java.net.InetSocketAddress httpAddress() {
    io.queen.embedded.internal.http.HttpSurface h = http;
    return h == null ? null : h.address();
  }

  /** The readiness check of the HTTP surface: the database answers a statement within 2 s. */
  private boolean databaseReachable() {
    try (java.sql.Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement()) {
      st.setQueryTimeout(2);
      st.execute("select 1");
      return true;
    } catch (java.sql.SQLException | RuntimeException e) {
      LOG.debug("{} - readiness: the database did not answer: {}", config.nodeId(), e.toString());
      return false;
    }
  }

  /** A consumer worker thread, from the application's factory when it gave one. */
  @Override
  public Thread newThread(String role, Runnable r) {
    String name = "queen-" + config.nodeId() + "-" + role;
    if (config.node().threadFactory() != null) {
      Thread t = config.node().threadFactory().newThread(r);
      t.setName(name);
      return t;
    }
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  /** A daemon thread of the node itself. */
  @Override
  public Thread newDaemon(String role, Runnable r) {
    Thread t = new Thread(r, "queen-" + config.nodeId() + "-" + role + "-" + threadCount.incrementAndGet());
    t.setDaemon(true);
    return t;
  }

  // ------------------------------------------------------------------------------------- the API

  @Override
  public QueueClient queue(String name) {
    return new QueueClientImpl(this, status, name);
  }

  @Override
  public List<PushResult> push(List<PushItem> items) {
    checkOpen();
    return broker.pushes().push(items, null);
  }

  @Override
  public AckResult ack(Message message) {
    return ack(message, AckStatus.COMPLETED, null);
  }

  @Override
  public AckResult ack(Message message, AckStatus status, String error) {
    Objects.requireNonNull(message, "message must not be null");
    return ack(List.of(message), status, error).get(0);
  }

  @Override
  public List<AckResult> ack(List<Message> messages) {
    return ack(messages, AckStatus.COMPLETED, null);
  }

  @Override
  public List<AckResult> ack(List<Message> messages, AckStatus status, String error) {
    Objects.requireNonNull(messages, "messages must not be null");
    Objects.requireNonNull(status, "status must not be null");
    checkOpen();
    if (messages.isEmpty()) {
      throw new IllegalArgumentException("ack: messages must not be empty");
    }
    List<Broker.AckRequest> reqs = new ArrayList<>(messages.size());
    for (int i = 0; i < messages.size(); i++) {
      reqs.add(new Broker.AckRequest(Objects.requireNonNull(messages.get(i), "messages[" + i + "]"), status, error));
    }
    return broker.ack(reqs);
  }

  @Override
  public boolean renew(Message message) {
    Objects.requireNonNull(message, "message must not be null");
    checkOpen();
    if (message.leaseId() == null) {
      throw new IllegalArgumentException("message " + message.id() + " was delivered with autoAck: it has no lease to renew");
    }
    return broker.renew(List.of(message)) == 1;
  }

  @Override
  public DeadLetters deadLetters(String queue) {
    return new DeadLettersImpl(broker, wakeups, this::checkOpen, queue);
  }

  @Override
  public Transaction transaction() {
    checkOpen();
    return Extensions.transaction(broker, kvStore, this::checkOpen, false);
  }

  @Override
  public TransactionImpl handlerTransaction() {
    checkOpen();
    return Extensions.transaction(broker, kvStore, this::checkOpen, true);
  }

  @Override
  public Kv kv() {
    return kv;
  }

  @Override
  public io.queen.Connectors connectors() {
    checkOpen();
    ConnectorPlugin p = connectors;
    if (p == null) {
      throw new UnsupportedOperationException(CONNECTORS_MISSING);
    }
    return p.connectors();
  }

  @Override
  public Status status() {
    checkOpen();
    Status s = status.read();
    ConnectorPlugin p = connectors;
    return p == null ? s : new Status(s.takenAt(), s.queues(), p.connectors().status(), s.nodes());
  }

  @Override
  public String nodeId() {
    return config.nodeId();
  }

  @Override
  public void close() {
    if (!closing.compareAndSet(false, true)) {
      return;
    }
    for (RunningSubscription s : List.copyOf(subscriptions)) {
      if (s.onOwnThread()) {
        // called by a handler: the close waits for running handlers, this one among them, so it runs on a thread
        // of its own and this call returns; the handler's work still counts (the grace period)
        String why = " (asked by a handler of " + s.queue() + "; the close goes on once handlers return)";
        // this subscription stops taking work now, before the call returns: its worker would otherwise take the next
        // message while the closer thread starts (CloseTest saw a second handler call)
        RunningSubscription own = s.beginClose() ? s : null;
        newDaemon("closer", () -> closeNow(why, own)).start();
        return;
      }
    }
    closeNow("", null);
  }

  /** The close; {@code begun}: a subscription whose close has begun already (a handler's own), or null. */
  private void closeNow(String why, RunningSubscription begun) {
    LOG.info("{} - closing{}", config.nodeId(), why);
    io.queen.embedded.internal.http.HttpSurface h = http;
    if (h != null) {
      h.close(); // no new HTTP request; those in flight finish first (a waiting pop returns once the node closes)
    }
    ConnectorPlugin p = connectors;
    if (p != null) {
      try {
        p.close(); // connector workers first: their subscriptions and leases go back before the rest
      } catch (RuntimeException e) {
        LOG.warn("{} - connectors did not close cleanly: {}", config.nodeId(), Sql.describe(e));
      }
    }
    connectorsClosed = true;
    // every subscription stops taking work first; then their running handlers share one grace period
    List<RunningSubscription> stopping = new ArrayList<>();
    if (begun != null) {
      stopping.add(begun);
    }
    for (RunningSubscription s : List.copyOf(subscriptions)) {
      if (s.beginClose()) {
        stopping.add(s);
      }
    }
    long deadline = System.nanoTime() + config.node().closeGrace().toNanos();
    for (RunningSubscription s : stopping) {
      s.finishClose(deadline);
    }
    closed = true; // the handlers are done: from here on, calls that do work throw
    releaseOwnedLeases();
    liveness.close(); // after the leases: the row goes, and the id is free for a clean restart at once
    scheduler.shutdown();
    janitor.shutdownNow(); // a pass in flight stops between its short transactions (or its statement is cancelled)
    wakeups.close();
    boolean interrupted = false;
    try {
      if (!scheduler.awaitTermination(2, TimeUnit.SECONDS)) {
        scheduler.shutdownNow();
        if (!scheduler.awaitTermination(2, TimeUnit.SECONDS)) {
          LOG.warn("{} - scheduler threads did not stop", config.nodeId());
        }
      }
      // a janitor pass in flight ends before the pool it uses closes (it logged a failed pass on a closed pool)
      if (!janitor.awaitTermination(2, TimeUnit.SECONDS)) {
        LOG.warn("{} - the janitor's pass did not stop within 2 s", config.nodeId());
      }
    } catch (InterruptedException e) {
      interrupted = true;
      scheduler.shutdownNow();
    }
    if (ownPool != null) {
      ownPool.close();
    }
    metrics.close(); // the node's gauges leave the application's registry; a closed node's last values would mislead
    LOG.info("{} - closed", config.nodeId());
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Gives back every lease this node still holds (manual pops; the subscriptions gave theirs back already)
   * without counting an attempt, before the own pool closes. Bounded; a failure is logged and close goes on
   * (the leases then expire by themselves, which counts one attempt).
   */
  private void releaseOwnedLeases() {
    try {
      int n = broker.releaseOwned(RELEASE_ON_CLOSE_TIMEOUT_MS, liveness.incarnation());
      if (n > 0) {
        LOG.info("{} - gave back {} lease(s) on close", config.nodeId(), n);
      }
    } catch (RuntimeException e) {
      LOG.warn("{} - could not give back this node's leases on close ({}); they expire by themselves", config.nodeId(),
          e instanceof QueenDatabaseException qe ? "SQLState " + qe.sqlState() : e.getClass().getName());
    }
  }

  @Override
  public io.queen.RetentionRun runRetentionNow() {
    checkOpen();
    idleGroups.expire(); // groups idle past groupIdleExpiry go first: retention then no longer waits for them
    return retention.run();
  }

  /** Runs a janitor task; a failure is logged (SQLState and primary message only) and the next period tries again. */
  private void quietly(String what, Runnable task) {
    try {
      task.run();
    } catch (RuntimeException e) {
      if (!closing.get()) {
        LOG.warn("{} - {} failed ({}); next try in a period", config.nodeId(), what, Sql.describe(e));
      }
    }
  }

  /** The node's metrics, which a binder can point at a registry after the start. */
  public MetricsSwitch metrics() {
    return (MetricsSwitch) metrics;
  }

  @Override
  public String toString() {
    return "Queen[" + config.nodeId() + (closed ? ", closed" : closing.get() ? ", closing" : "") + "]";
  }
}
