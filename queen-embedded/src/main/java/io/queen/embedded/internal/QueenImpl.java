package io.queen.embedded.internal;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.BrokerClosedException;
import io.queen.DatabaseLoginException;
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
import io.queen.embedded.internal.db.Migrator;
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
  private volatile io.queen.embedded.spi.ConnectorPlugin connectors;

  private QueenImpl(QueenConfig config, DataSource ds, HikariDataSource ownPool) {
    this.config = config;
    this.ds = ds;
    this.ownPool = ownPool;
    JsonCodec codec = new JsonCodec(config.mapper());
    this.wakeups = new Wakeups(ds, config.schema(), config.nodeId(), (role, r) -> newDaemon(role, r));
    this.metrics = new MetricsSwitch(config.nodeId(), config.meterRegistry() == null ? Metrics.NOOP
        : new MicrometerMetrics(config.meterRegistry(), config.meterTags()), config.meterTags());
    this.broker = new Broker(ds, config.schema(), codec, config.nodeId(), wakeups, metrics, config.maxPayloadBytes(),
        config.connectTimeout(), config.payloadTypes(), new PayloadCipher(config.encryptionKey(), config.oldEncryptionKeys()));
    this.status = new StatusReader(ds, broker.schema(), broker.cipher().ids());
    this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> newDaemon("scheduler", r));
    this.kvStore = Extensions.kvStore(config, codec);
    this.kv = Extensions.kv(ds, kvStore, this::checkOpen);
    this.connectorKv = Extensions.connectorKv(ds, kvStore, this::checkConnectorsOpen);
    this.liveness = new Liveness(ds, broker.schema(), config.nodeId(), config.sessionTimeout(), config.heartbeatInterval());
    // retention passes and the group gauges get a thread of their own: the scheduler renews leases and must not wait
    this.janitor = Executors.newSingleThreadScheduledExecutor(r -> newDaemon("janitor", r));
    this.retention = new RetentionJanitor(config.nodeId(), ds, broker.schema(), metrics,
        config.removeEmptyPartitionsAfter());
    this.groupWatch = new GroupWatch(config.nodeId(), ds, broker.schema(), status, metrics, broker.catalogue());
    this.idleGroups = new IdleGroups(config.nodeId(), ds, broker.schema(), broker, config.groupIdleExpiry());
    this.horizonWatch = new HorizonWatch(config.nodeId(), ds, metrics, config.horizonWarnAfter());
    this.statisticsGuard = new StatisticsGuard(config.nodeId(), ds, broker.schema());
  }

  /** How often the janitor removes the rows of nodes whose heartbeat stopped more than a day ago. */
  static final long FORGET_NODES_PERIOD_MS = 60_000;

  /** How long {@link #close()} lets the statement that gives back this node's leases run. */
  static final long RELEASE_ON_CLOSE_TIMEOUT_MS = 2_000;

  /** DataSources that open a connection per call; Queen warns at the start when given one. */
  static final java.util.Set<String> UNPOOLED = java.util.Set.of("org.postgresql.ds.PGSimpleDataSource",
      "org.postgresql.jdbc2.optional.SimpleDataSource", "org.springframework.jdbc.datasource.DriverManagerDataSource",
      "org.springframework.jdbc.datasource.SimpleDriverDataSource");

  /**
   * An application's HikariCP pool too small for the connections a node keeps for as long as it runs (the heartbeat's,
   * and the wake-up listener's with {@code listen}) is refused: every other call would wait out the pool's timeout. One
   * with fewer than two connections beside them is started with a WARN.
   */
  private static void checkPoolSize(QueenConfig config) {
    if (!(config.dataSource() instanceof HikariDataSource h)) {
      return; // another pool: its size is not known here
    }
    int kept = config.listen() ? 2 : 1;
    int max = h.getMaximumPoolSize();
    String what = config.listen() ? "its heartbeat and its wake-up listener" : "its heartbeat";
    if (max <= kept) {
      throw new IllegalArgumentException("the DataSource is a HikariCP pool of at most " + max + " connection(s), and"
          + " this node keeps " + kept + " of them for " + what + " for as long as it runs: none would be left for"
          + " pushes, pops and acks. Give the pool at least " + (kept + 2) + " connections, plus one per consume worker"
          + " whose handler holds a connection of its own while it calls Queen (README: \"Handing Queen your pool\")");
    }
    if (max < kept + 2) {
      LOG.warn("{} - the DataSource is a HikariCP pool of at most {} connection(s), and this node keeps {} of them for {}:"
          + " every push, pop and ack goes through the one left. Give the pool at least {}", config.nodeId(), max, kept,
          what, kept + 2);
    }
  }

  /** Validated config in; a started node out. */
  public static Queen start(QueenConfig config) {
    HikariDataSource own = null;
    DataSource ds = config.dataSource();
    if (ds == null) {
      own = openPool(config);
      ds = own;
    } else {
      checkPoolSize(config);
      ds = ReadCommitted.ensure(ds, config.nodeId()); // the application's pool may default to a stricter level
    }
    QueenImpl started = null;
    try {
      Migrator.migrate(ds, config.schema(), schemaModules());
      QueenImpl q = new QueenImpl(config, ds, own);
      started = q;
      // before anything runs: a node whose key is not one of the cluster's must not start
      q.broker.keys().onStart(config.adoptEncryptionKey());
      q.liveness.register(); // refuses an id a live node holds; takes over a dead one's leases
      q.liveness.onOthersAlive(q.wakeups::othersAlive);
      q.liveness.start((role, r) -> q.newDaemon(role, r));
      if (config.listen()) {
        q.wakeups.startListener();
      }
      q.wakeups.startNotifier();
      Extensions.startJanitor(config, q.ds, q.scheduler);
      if (config.janitor()) {
        q.scheduler.scheduleWithFixedDelay(q::forgetOldNodes, 1_000, FORGET_NODES_PERIOD_MS, TimeUnit.MILLISECONDS);
        q.janitor.scheduleWithFixedDelay(q::forgetOldReceipts, 5_000, FORGET_RECEIPTS_PERIOD_MS, TimeUnit.MILLISECONDS);
      }
      q.metrics.bindListener(q.wakeups::connected);
      q.janitor.scheduleWithFixedDelay(q.groupWatch, 0, GroupWatch.PERIOD_MS, TimeUnit.MILLISECONDS);
      q.janitor.scheduleWithFixedDelay(() -> q.quietly("group activity", q.idleGroups::record), GroupWatch.PERIOD_MS,
          GroupWatch.PERIOD_MS, TimeUnit.MILLISECONDS);
      q.janitor.scheduleWithFixedDelay(q.horizonWatch, HorizonWatch.PERIOD_MS / 2, HorizonWatch.PERIOD_MS,
          TimeUnit.MILLISECONDS);
      if (config.janitor()) {
        // at a fixed rate: a pass that takes longer than the period (more to remove than the janitor's paced share
        // of the server clears in one) is followed by the next at once, so removal keeps level with ingest
        q.janitor.scheduleAtFixedRate(q.retention::runQuietly, RetentionJanitor.PERIOD_MS / 3,
            RetentionJanitor.PERIOD_MS, TimeUnit.MILLISECONDS);
        q.janitor.scheduleWithFixedDelay(q.statisticsGuard, StatisticsGuard.PERIOD_MS / 2, StatisticsGuard.PERIOD_MS,
            TimeUnit.MILLISECONDS);
        q.janitor.scheduleWithFixedDelay(() -> q.quietly("idle group expiry", q.idleGroups::expire),
            RetentionJanitor.PERIOD_MS, RetentionJanitor.PERIOD_MS, TimeUnit.MILLISECONDS);
      }
      q.startConnectors();
      if (config.http() != null) {
        q.http = io.queen.embedded.internal.http.HttpSurface.start(config.http(), q, r -> q.newDaemon("http", r),
            q::databaseReachable, config.meterRegistry());
      }
      LOG.info("{} - Queen {} started: {}", config.nodeId(), Queen.version(), config.describe());
      if (config.dataSource() != null && UNPOOLED.contains(config.dataSource().getClass().getName())) {
        LOG.warn("{} - the DataSource given is a {}, which opens a new connection for every call (Queen makes several"
            + " per message, each then costs a login): hand Queen a pool such as HikariCP, or give jdbcUrl(...) and"
            + " Queen runs its own", config.nodeId(), config.dataSource().getClass().getSimpleName());
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

  /** The core's schema and that of the first {@link io.queen.embedded.spi.ConnectorProvider} on the classpath. */
  private static List<io.queen.embedded.spi.SchemaModule> schemaModules() {
    List<io.queen.embedded.spi.SchemaModule> modules = new java.util.ArrayList<>(List.of(Migrator.CORE));
    for (io.queen.embedded.spi.ConnectorProvider p : java.util.ServiceLoader.load(
        io.queen.embedded.spi.ConnectorProvider.class, QueenImpl.class.getClassLoader())) {
      modules.addAll(p.schema());
      break;
    }
    return modules;
  }

  /** Starts the first {@link io.queen.embedded.spi.ConnectorProvider} on the classpath, if any. */
  private void startConnectors() {
    for (io.queen.embedded.spi.ConnectorProvider p : java.util.ServiceLoader.load(
        io.queen.embedded.spi.ConnectorProvider.class, QueenImpl.class.getClassLoader())) {
      connectors = p.start(new ConnectorHostImpl(this, config, this, connectorKv, metrics()));
      return;
    }
  }

  /** How often the janitor removes push receipts older than the node's pushReceiptRetention. */
  static final long FORGET_RECEIPTS_PERIOD_MS = 60_000;

  /** Removes old push receipts (at most 100 chunks a pass; the next pass goes on); never throws. */
  public void forgetOldReceipts() {
    try {
      long n = PushReceipts.forgetOldReceipts(ds, broker.schema(), config.pushReceiptRetention(), 100);
      if (n > 0) {
        LOG.debug("{} - removed {} push receipt(s) older than {}", config.nodeId(), n, config.pushReceiptRetention());
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

  /**
   * Queen's own pool: every wait for a connection is bounded by {@code connectTimeout} (HikariCP's
   * connection timeout, pgjdbc's connect and login timeouts), and the pool fails at once, within that
   * bound, when the first connection cannot be made: a refused login is a {@link DatabaseLoginException},
   * an unreachable server a transient {@link QueenDatabaseException} naming host and port. Neither
   * carries the password or the URL's parameters.
   */
  private static HikariDataSource openPool(QueenConfig config) {
    long ms = config.connectTimeout().toMillis();
    int seconds = (int) Math.max(1, (ms + 999) / 1000); // pgjdbc takes whole seconds
    HikariConfig hc = new HikariConfig();
    hc.setJdbcUrl(config.jdbcUrl());
    hc.setUsername(config.user());
    hc.setPassword(config.password());
    hc.setMaximumPoolSize(config.poolSize() + 1); // + the heartbeat's own connection
    hc.setPoolName("queen-" + config.nodeId());
    // Queen's statements are correct at READ COMMITTED only; set on each connection, whatever the database's
    // default_transaction_isolation says (ReadCommitted explains why)
    hc.setTransactionIsolation("TRANSACTION_READ_COMMITTED");
    hc.setConnectionTimeout(ms);
    hc.setValidationTimeout(Math.min(ms, 5_000));
    // as strings: pgjdbc reads only string properties, and an Integer here was ignored (a server that accepted
    // the connection and never answered held the start with no limit)
    hc.addDataSourceProperty("connectTimeout", String.valueOf(seconds));
    hc.addDataSourceProperty("loginTimeout", String.valueOf(seconds));
    long t0 = System.nanoTime();
    refuseABadLoginAtOnce(config, seconds);
    // the pool's tries get what the probe left of connectTimeout, so a start never waits twice for one host
    hc.setInitializationFailTimeout(Math.max(1, ms - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)));
    try {
      return new HikariDataSource(hc);
    } catch (RuntimeException e) { // HikariPool.PoolInitializationException
      java.sql.SQLException login = Sql.loginFailure(e);
      if (login != null) {
        throw new DatabaseLoginException(config.user(), login.getSQLState(), login);
      }
      java.sql.SQLException refused = Sql.configurationFailure(e);
      if (refused != null) {
        throw new QueenDatabaseException("connect to PostgreSQL at " + hostPort(config.jdbcUrl()) + " ("
            + Sql.configurationFix(refused) + ")", refused.getSQLState(), false, Sql.sanitize(refused));
      }
      java.sql.SQLException cause = e.getCause() instanceof java.sql.SQLException se ? se : null;
      throw new QueenDatabaseException("connect to PostgreSQL at " + hostPort(config.jdbcUrl()) + " within connectTimeout "
          + config.connectTimeout(), cause != null ? cause.getSQLState() : null, true, cause != null ? cause : e);
    }
  }

  /**
   * One connection straight from the driver before the pool starts: a login the server refuses (SQLState class 28),
   * a database that does not exist (3D000) or a role that may not connect to it (42501) is refused at once, where the
   * pool would try again every second until connectTimeout (none of them passes by waiting). Any other failure (a
   * server still starting) is left to the pool's tries.
   */
  private static void refuseABadLoginAtOnce(QueenConfig config, int seconds) {
    java.util.Properties props = new java.util.Properties();
    if (config.user() != null) {
      props.setProperty("user", config.user());
    }
    if (config.password() != null) {
      props.setProperty("password", config.password());
    }
    props.setProperty("connectTimeout", Integer.toString(seconds));
    props.setProperty("loginTimeout", Integer.toString(seconds));
    try (java.sql.Connection c = new org.postgresql.Driver().connect(config.jdbcUrl(), props)) {
      // reached and accepted: the pool opens its own
    } catch (java.sql.SQLException e) {
      if (e.getSQLState() != null && e.getSQLState().startsWith("28")) {
        throw new DatabaseLoginException(config.user(), e.getSQLState(), e);
      }
      if (Sql.configurationFailure(e) != null) {
        throw new QueenDatabaseException("connect to PostgreSQL at " + hostPort(config.jdbcUrl()) + " ("
            + Sql.configurationFix(e) + ")", e.getSQLState(), false, Sql.sanitize(e));
      }
    }
  }

  /** The host:port part of a JDBC URL (no database, no parameters), for messages. */
  static String hostPort(String url) {
    String rest = url.substring("jdbc:postgresql:".length());
    if (!rest.startsWith("//")) {
      return "localhost:5432";
    }
    rest = rest.substring(2);
    int end = rest.length();
    for (char ch : new char[] {'/', '?'}) {
      int i = rest.indexOf(ch);
      if (i >= 0 && i < end) {
        end = i;
      }
    }
    String hp = rest.substring(0, end);
    int at = hp.lastIndexOf('@'); // never echo credentials written into the authority
    return at >= 0 ? hp.substring(at + 1) : hp;
  }

  // ------------------------------------------------------------------------------ internal access

  public QueenConfig config() {
    return config;
  }

  @Override
  public Duration pollInterval() {
    return config.pollInterval();
  }

  @Override
  public Duration closeGrace() {
    return config.closeGrace();
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
    if (config.threadFactory() != null) {
      Thread t = config.threadFactory().newThread(r);
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
    io.queen.embedded.spi.ConnectorPlugin p = connectors;
    if (p == null) {
      throw new UnsupportedOperationException(CONNECTORS_MISSING);
    }
    return p.connectors();
  }

  @Override
  public Status status() {
    checkOpen();
    Status s = status.read();
    io.queen.embedded.spi.ConnectorPlugin p = connectors;
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
    io.queen.embedded.spi.ConnectorPlugin p = connectors;
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
    long deadline = System.nanoTime() + config.closeGrace().toNanos();
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
