package io.queen.embedded;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.Queen;
import io.queen.embedded.internal.QueenImpl;
import io.queen.embedded.internal.config.ConnectionConfig;
import io.queen.embedded.internal.config.EncryptionConfig;
import io.queen.embedded.internal.config.HousekeepingConfig;
import io.queen.embedded.internal.config.MetricsConfig;
import io.queen.embedded.internal.config.NodeConfig;
import io.queen.embedded.internal.config.PayloadConfig;
import io.queen.embedded.internal.config.QueenConfig;
import io.queen.embedded.spi.ConnectorSettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ThreadFactory;
import java.util.regex.Pattern;
import javax.sql.DataSource;

/**
 * Starts Queen inside this JVM against the application's PostgreSQL.
 *
 * <pre>{@code
 * Queen queen = EmbeddedQueen.builder().dataSource(ds).start();
 * }</pre>
 *
 * <p>{@link Builder#start()} validates every option, migrates the schema (under an advisory lock, so
 * nodes starting together do not collide), registers the node in {@code <schema>.nodes} (refusing an id a
 * live node holds), and starts the node's daemon threads: the heartbeat (a connection of its own), one
 * LISTEN connection for wake-ups, and the janitor. Consumer threads start only with {@code consume(...)}: a process that
 * only pushes runs none.
 *
 * <p>(Over 600 lines on purpose: the builder is the one place a user reads every option, its default, its range and
 * the error it gives; each option's javadoc and its check stay side by side.)
 */
public final class EmbeddedQueen {
  /** Default schema: {@value}. */
  public static final String DEFAULT_SCHEMA = "queen";
  /** Default bound on how long a waiting consumer sleeps between polls when no notification arrives. */
  public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofMillis(500);
  /** Default grace period of {@link Queen#close()} for running handlers. */
  public static final Duration DEFAULT_CLOSE_GRACE = Duration.ofSeconds(10);
  /** Default pool size when Queen opens its own pool ({@link Builder#jdbcUrl}). */
  public static final int DEFAULT_POOL_SIZE = 10;
  /** Default byte ceiling of one KV prefix read: 4 MiB. */
  public static final long DEFAULT_KV_MAX_READ_BYTES = 4L * 1024 * 1024;
  /** Default largest payload a push accepts, in bytes of JSON text (UTF-8): 8 MiB. */
  public static final int DEFAULT_MAX_PAYLOAD_BYTES = 8 * 1024 * 1024;
  /** Upper bound of {@link Builder#maxPayloadBytes}: 64 MiB, well inside what jsonb and the reader hold. */
  public static final int MAX_PAYLOAD_BYTES_LIMIT = 64 * 1024 * 1024;
  /** Default bound on how long Queen waits for a database connection: 5 s. */
  public static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(5);
  /** Default session timeout: a node whose heartbeat is older than this is dead and its leases are free: 10 s. */
  public static final Duration DEFAULT_SESSION_TIMEOUT = Duration.ofSeconds(10);
  /** Shortest {@link Builder#sessionTimeout}: 2 s (a heartbeat every 400 ms). */
  public static final Duration MIN_SESSION_TIMEOUT = Duration.ofSeconds(2);
  /** Longest {@link Builder#sessionTimeout}: 10 min. */
  public static final Duration MAX_SESSION_TIMEOUT = Duration.ofMinutes(10);
  /** Default {@link Builder#pushReceiptRetention}: 24 h. */
  public static final Duration DEFAULT_PUSH_RECEIPT_RETENTION = Duration.ofHours(24);
  /** Shortest {@link Builder#pushReceiptRetention}: 10 min, twice the longest {@link Builder#connectTimeout}. */
  public static final Duration MIN_PUSH_RECEIPT_RETENTION = Duration.ofMinutes(10);
  /** Longest {@link Builder#pushReceiptRetention}: 30 days. */
  public static final Duration MAX_PUSH_RECEIPT_RETENTION = Duration.ofDays(30);
  /** Default {@link Builder#groupIdleExpiry}: 7 days, as Kafka's {@code offsets.retention.minutes}. */
  public static final Duration DEFAULT_GROUP_IDLE_EXPIRY = Duration.ofDays(7);

  /** Default {@link Builder#removeEmptyPartitionsAfter}: 24 h. */
  public static final Duration DEFAULT_REMOVE_EMPTY_PARTITIONS_AFTER = Duration.ofHours(24);

  /** The environment variable read for the node's encryption key when the builder gives none. */
  public static final String ENCRYPTION_KEY_ENV = "QUEEN_ENCRYPTION_KEY";
  /** The environment variable with older keys (comma-separated 64 hex digits each) kept for reading after a rotation. */
  public static final String OLD_ENCRYPTION_KEYS_ENV = "QUEEN_ENCRYPTION_OLD_KEYS";

  private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();
  private static final Pattern SCHEMA = Pattern.compile("[a-z_][a-z0-9_]{0,62}");
  private static final Pattern NODE = Pattern.compile("[A-Za-z0-9._-]{1,64}");

  private EmbeddedQueen() {}

  /**
   * The address a node's HTTP surface listens on (its real port when {@code HttpOptions.port(0)} asked for a free
   * one), or empty when the node was built without {@code http(...)} or is not an embedded node.
   */
  public static java.util.Optional<java.net.InetSocketAddress> httpAddress(Queen queen) {
    Objects.requireNonNull(queen, "queen must not be null");
    return queen instanceof QueenImpl q ? java.util.Optional.ofNullable(q.httpAddress()) : java.util.Optional.empty();
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Collects options; {@link #start()} validates them all before anything starts. Not thread-safe. */
  public static final class Builder {
    private DataSource dataSource;
    private String jdbcUrl;
    private String user;
    private String password;
    private int poolSize = DEFAULT_POOL_SIZE;
    private boolean poolSizeSet;
    private String schema = DEFAULT_SCHEMA;
    private String nodeId;
    private ObjectMapper objectMapper;
    private ThreadFactory threadFactory;
    private Duration pollInterval = DEFAULT_POLL_INTERVAL;
    private Duration closeGrace = DEFAULT_CLOSE_GRACE;
    private boolean listen = true;
    private boolean janitor = true;
    private long kvMaxReadBytes = DEFAULT_KV_MAX_READ_BYTES;
    private Object meterRegistry;
    private List<String> meterTags = List.of();
    private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
    private Duration connectTimeout = DEFAULT_CONNECT_TIMEOUT;
    private Duration sessionTimeout = DEFAULT_SESSION_TIMEOUT;
    private Duration pushReceiptRetention = DEFAULT_PUSH_RECEIPT_RETENTION;
    private Duration removeEmptyPartitionsAfter = DEFAULT_REMOVE_EMPTY_PARTITIONS_AFTER;
    private Duration groupIdleExpiry = DEFAULT_GROUP_IDLE_EXPIRY;
    private String encryptionKey;
    private boolean encryptionKeySet;
    private Duration horizonWarnAfter = Duration.ofSeconds(60);
    private final io.queen.PayloadTypes.Builder payloadTypes = io.queen.PayloadTypes.builder();
    private final List<String> typeErrors = new java.util.ArrayList<>();
    private List<String> oldKeys;
    private boolean adoptEncryptionKey;
    private io.queen.embedded.http.HttpOptions http;
    private ConnectorSettings connectors;

    private Builder() {}

    /**
     * Registers a payload class as type {@code name} in schema {@code version}, like {@link io.queen.QueenType}
     * on the class (this wins over the annotation). A push of an instance stores the name and version with the
     * message; {@code message.payload(type)} checks them and reads older versions through the upcasters. The
     * name is what is stored: the class may be renamed or moved freely.
     */
    public Builder payloadType(Class<?> type, String name, int version) {
      try {
        payloadTypes.register(type, name, version);
      } catch (IllegalArgumentException | NullPointerException e) {
        typeErrors.add(e.getMessage());
      }
      return this;
    }

    /**
     * Registers the upcaster of payload type {@code name} from {@code fromVersion} to {@code fromVersion + 1}.
     * Upcasters chain: a consumer of version 3 reads a version 1 message through 1→2 then 2→3.
     */
    public Builder upcaster(String name, int fromVersion, io.queen.PayloadUpcaster upcaster) {
      try {
        payloadTypes.upcaster(name, fromVersion, upcaster);
      } catch (IllegalArgumentException | NullPointerException e) {
        typeErrors.add(e.getMessage());
      }
      return this;
    }

    /**
     * The node's AES-256 key as 64 hex digits, used to seal the passwords of connector documents
     * (AES-256-GCM) and the payloads of queues with {@code encryption} (a node without it refuses to push to or
     * pop from them). Default: the environment variable {@value #ENCRYPTION_KEY_ENV}, else none (then a
     * connector document that carries a password is refused on this node, with an error that says so).
     * Every node of a cluster needs the same key: a node whose key is not one the cluster has adopted refuses to
     * start (see {@link #adoptEncryptionKey()}). {@code null} means none, whatever the environment says.
     */
    public Builder encryptionKey(String hex64) {
      this.encryptionKey = hex64;
      this.encryptionKeySet = true;
      return this;
    }

    /**
     * Older AES-256 keys (64 hex digits each) this node still opens payloads of encrypted queues with, after a
     * key rotation; new payloads are sealed under {@link #encryptionKey} only. Each stored message names its key
     * by id, so any number of older keys may be given. Default: the environment variable
     * {@value #OLD_ENCRYPTION_KEYS_ENV} (comma-separated), else none. Needs an {@code encryptionKey}.
     */
    public Builder oldEncryptionKeys(String... hex64) {
      this.oldKeys = List.of(hex64);
      return this;
    }

    /**
     * Lets this node add its {@link #encryptionKey} to the cluster's keys when it starts. The cluster lists the ids
     * of the keys its nodes may seal with (table {@code encryption_keys}; ids only); a node whose key is not listed
     * refuses to start while the list names any key, with an {@link io.queen.EncryptionException} naming the ids,
     * and refuses to seal a push while the list is empty. Adopt the first key of a cluster with one node started
     * with this option. Adopting a further key (a rotation) also needs a key already listed among this node's
     * {@link #oldEncryptionKeys}, so that a node with a mistyped key cannot adopt it. A key already listed is left
     * as it is. Default: off. Needs an {@code encryptionKey}.
     */
    public Builder adoptEncryptionKey() {
      this.adoptEncryptionKey = true;
      return this;
    }

    /**
     * The options of the connector module on the classpath: queen-pgconn's {@code io.queen.pgconn.ConnectorOptions}
     * (its threads, how often it re-reads the connector documents, whether this node runs connectors, a source's
     * lease). Checked with the other options; without them the module runs with its defaults. A node given options
     * while no connector module is on the classpath, or options of another module, refuses to start.
     */
    public Builder connectors(ConnectorSettings options) {
      this.connectors = Objects.requireNonNull(options, "connectors must not be null");
      return this;
    }

    /**
     * How long a transaction may hold the database's xmin horizon before the node logs a WARN naming it (its pid,
     * application, user and state), and an INFO when it ends (0 = never; else 1 s .. 1 day; default 60 s). While any
     * transaction or snapshot is open, PostgreSQL removes no dead row version written after it began; Queen's hot rows
     * are updated on every push, pop and ack, so its calls slow as such a transaction ages (a forgotten {@code BEGIN}, an
     * idle-in-transaction session, a long report, {@code pg_dump}). The age is also the gauge
     * {@code queen.database.horizon.age}. Checked every 10 s on every node; a role without {@code pg_read_all_stats}
     * sees only its own role's sessions. A standby's {@code hot_standby_feedback} (a query running on a replica) is
     * named by its physical slot, timed from when the node first saw it hold the horizon.
     */
    public Builder horizonWarnAfter(Duration after) {
      this.horizonWarnAfter = Objects.requireNonNull(after, "horizonWarnAfter must not be null");
      return this;
    }

    /** The application's DataSource. Queen borrows connections and never closes it. */
    public Builder dataSource(DataSource dataSource) {
      this.dataSource = Objects.requireNonNull(dataSource, "dataSource must not be null");
      return this;
    }

    /** Instead of a DataSource: Queen opens (and on close, closes) its own HikariCP pool. */
    public Builder jdbcUrl(String url, String user, String password) {
      this.jdbcUrl = Objects.requireNonNull(url, "url must not be null");
      this.user = user;
      this.password = password;
      return this;
    }

    /** Size of the pool Queen opens with {@link #jdbcUrl} (2..200; default 10). */
    public Builder poolSize(int size) {
      this.poolSize = size;
      this.poolSizeSet = true;
      return this;
    }

    /** The schema that holds Queen's tables (lower-case identifier; default {@value #DEFAULT_SCHEMA}). */
    public Builder schema(String schema) {
      this.schema = Objects.requireNonNull(schema, "schema must not be null");
      return this;
    }

    /**
     * This node's id ({@code [A-Za-z0-9._-]{1,64}}); default: a random one ({@code n} + 16 hex digits, 64
     * random bits).
     *
     * <p>A fixed id is a static membership (Kafka's {@code group.instance.id}): give each instance its own,
     * stable id (for example {@code "orders-worker-" + ordinal} in a StatefulSet). An instance that restarts
     * after a crash with the id of its predecessor takes the id over as soon as the predecessor's heartbeat
     * is older than the predecessor's session timeout ({@code start()} waits for that, at most about this node's
     * {@link #sessionTimeout}), and expires the leases the predecessor still held, so other consumers (or this
     * node) take those partitions at once; each such lease counts one attempt, like any expired lease. When
     * the id is held by a node that keeps heartbeating, {@code start()} fails with
     * {@link io.queen.NodeIdInUseException} naming the id, and nothing changes. A clean {@link Queen#close()}
     * frees the id at once.
     */
    public Builder nodeId(String nodeId) {
      this.nodeId = Objects.requireNonNull(nodeId, "nodeId must not be null");
      return this;
    }

    /**
     * The ObjectMapper for payloads and KV values; default: a plain {@code new ObjectMapper()} with modules found.
     * Queen works on a {@link ObjectMapper#copy() copy} (the mapper must support it) whose reader accepts strings up
     * to 64 MiB, so every node reads what any node may write; the application's mapper is not changed. Its other
     * read limits (nesting depth, number and name length) are kept, and a push is refused when its text is beyond
     * them, so what is written can be read back.
     */
    public Builder objectMapper(ObjectMapper mapper) {
      this.objectMapper = Objects.requireNonNull(mapper, "objectMapper must not be null");
      return this;
    }

    /** Factory for consumer worker threads (named by Queen; made daemon unless the factory decides). */
    public Builder threadFactory(ThreadFactory factory) {
      this.threadFactory = Objects.requireNonNull(factory, "threadFactory must not be null");
      return this;
    }

    /** Bound on how long a waiting pop sleeps between polls (10 ms .. 60 s; default 500 ms). */
    public Builder pollInterval(Duration interval) {
      this.pollInterval = Objects.requireNonNull(interval, "pollInterval must not be null");
      return this;
    }

    /** Grace period of {@link Queen#close()} for running handlers (0 .. 10 min; default 10 s). */
    public Builder closeGracePeriod(Duration grace) {
      this.closeGrace = Objects.requireNonNull(grace, "closeGracePeriod must not be null");
      return this;
    }

    /** Whether to hold a LISTEN connection for wake-ups (default true; without it, waiters poll). */
    public Builder listen(boolean listen) {
      this.listen = listen;
      return this;
    }

    /**
     * Whether this node runs the janitor; default true. The janitor sweeps expired KV entries, runs the retention
     * passes, forgets nodes whose heartbeat stopped a day ago, and analyzes Queen's tables when the planner's row
     * estimate says they are nearly empty and they are not (see the module README, "The statistics guard").
     */
    public Builder janitor(boolean janitor) {
      this.janitor = janitor;
      return this;
    }

    /** Byte ceiling of one KV prefix read (64 KiB .. 256 MiB; default 4 MiB). */
    public Builder kvMaxReadBytes(long bytes) {
      this.kvMaxReadBytes = bytes;
      return this;
    }

    /**
     * Report metrics to this Micrometer registry (micrometer-core must be on the classpath): counters of
     * pushed, delivered, acked, failed and dead-lettered messages, handler and delivery-latency timers,
     * lag and pending-age gauges; tags queue and group.
     */
    public Builder meterRegistry(io.micrometer.core.instrument.MeterRegistry registry) {
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry must not be null");
      return this;
    }

    /**
     * Tags every meter of this node carries, connectors' included, as key/value pairs
     * ({@code meterTags("queen.db", "billing")}): for two or more nodes in one JVM that report to one registry (two
     * databases, or a test), whose meters would otherwise share names and tags (the first node's gauge would win, and
     * the first node to close would remove the other's). Keys {@code [A-Za-z][A-Za-z0-9._-]{0,63}}, not one of the
     * tags Queen sets itself ({@code queue}, {@code group}, {@code outcome}, {@code connector}); values 1..256
     * characters. Keep values stable across restarts (a database or service name, not a random node id): each
     * value is a new series to a monitoring system. They apply to a registry bound later through
     * {@code QueenMeterBinder} too; without any registry they change nothing.
     * (Giving each node a {@code CompositeMeterRegistry} with common tags of its own does not work: Queen adds the
     * registry to a composite of its own, and Micrometer then registers into the composite's children directly.)
     */
    public Builder meterTags(String... keyValues) {
      Objects.requireNonNull(keyValues, "meterTags must not be null");
      this.meterTags = java.util.Arrays.asList(keyValues.clone());
      return this;
    }

    /**
     * The largest payload a push accepts, in bytes of its JSON text as UTF-8 (1 KiB .. 64 MiB; default
     * 8 MiB). A bigger item is refused with a {@link io.queen.PayloadSerializationException} before
     * anything is sent, naming its index ({@code items[3].payload is 52428800 bytes of JSON; the limit is
     * 8388608 (maxPayloadBytes)}); nothing of the batch is stored. Every node's reader accepts 64 MiB,
     * whatever this node's limit, so nodes with different limits read each other's messages.
     */
    public Builder maxPayloadBytes(int bytes) {
      this.maxPayloadBytes = bytes;
      return this;
    }

    /**
     * How long Queen waits for a database connection before a call fails (250 ms .. 5 min; default 5 s).
     * Applies to the pool Queen opens with {@link #jdbcUrl}: HikariCP's connection timeout, pgjdbc's
     * {@code connectTimeout} and {@code loginTimeout} (whole seconds, rounded up), and the start itself,
     * which fails within about this long when the server cannot be reached (a transient
     * {@link io.queen.QueenDatabaseException} naming host and port) or refuses the login
     * ({@link io.queen.DatabaseLoginException}). A call that gets no connection in time fails with a
     * transient {@code QueenDatabaseException}. With {@link #dataSource} the application's pool decides
     * (set its connection timeout).
     *
     * <p>It is also, with either form, how long a push keeps trying again after its first transient failure
     * (a lost connection, a terminated backend, a serialization failure or deadlock): see
     * {@link io.queen.Queen#push}.
     */
    public Builder connectTimeout(Duration timeout) {
      this.connectTimeout = Objects.requireNonNull(timeout, "connectTimeout must not be null");
      return this;
    }

    /**
     * How long a node may go without a heartbeat before the others treat it as dead (2 s .. 10 min; default
     * 10 s). Every node renews its row in {@code <schema>.nodes} on the database clock every heartbeat
     * interval, a fifth of this timeout and at most 2 s (so a timeout is always more than three intervals),
     * from a daemon thread {@code queen-<node>-heartbeat-<n>} on a connection of its own. A lease whose
     * owner's heartbeat is older than the owner's session timeout is free to take, whatever the lease time
     * says: a crashed node stalls its partitions for about this long, not for a lease time. A live node
     * that overruns its lease still loses it at the lease's expiry. Shorter is faster recovery
     * and a higher risk that a long GC pause or a network stall makes a live node look dead (its leases
     * are then taken over, and its acks of them report {@code LEASE_LOST}).
     */
    public Builder sessionTimeout(Duration timeout) {
      this.sessionTimeout = Objects.requireNonNull(timeout, "sessionTimeout must not be null");
      return this;
    }

    /**
     * How long push receipts are kept (10 min .. 30 days; default 24 h): the window in which pushing
     * {@link io.queen.PushOutcomeUnknownException#items()} again still finds what the failed push stored. A push
     * that puts two or more items with generated transaction ids into one partition records them in one receipt
     * row (about 90 bytes) instead of an index entry per message, and this node's janitor removes receipts older
     * than this every minute (with {@link #janitor} on). A producer at 20,000 msgs/s in batches of 100 over 10
     * partitions writes about 2,000 receipts a second, some 15 GB a day: a shorter window keeps that table small.
     * Queen's own retries happen within {@link #connectTimeout}, which the shortest window covers twice. Your own
     * transaction ids are found as long as their messages are stored, whatever this says. Every node that runs the
     * janitor removes what is older than its own setting, so the shortest one among them wins: give every node
     * the same.
     */
    public Builder pushReceiptRetention(Duration retention) {
      this.pushReceiptRetention = Objects.requireNonNull(retention, "pushReceiptRetention must not be null");
      return this;
    }

    /**
     * How long a partition of a queue with retention must have held no message and had no push before the
     * retention janitor removes it (0: never; otherwise 1 min .. 365 days; default 24 h). Retention removes
     * messages; without this a partition's row and its cursor per consumer group would stay for good, and an
     * application that names a partition per entity (an order id; the source connector's row keys) would grow them
     * without end, each retention pass walking them all. A partition is removed only when it has no lease, no
     * redelivery waiting, no dead letter and no recorded retention loss, and never while a push holds it. A later push
     * that names it creates it anew, as any new partition: a new partition id, offsets from 0, every group's cursor at
     * its start. A transaction id de-duplicates only against messages still stored, so nothing is lost there that
     * retention had not already removed. Each janitor pass removes what it found (with {@link #janitor} on); the
     * counter {@code queen.retention.partitions.removed} and {@link io.queen.RetentionRun#emptyPartitionsRemoved()}
     * say how many.
     */
    public Builder removeEmptyPartitionsAfter(Duration idle) {
      this.removeEmptyPartitionsAfter = Objects.requireNonNull(idle, "removeEmptyPartitionsAfter must not be null");
      return this;
    }

    /**
     * How long a named consumer group may go without a pop, an ack or a seek before the janitor removes it (default 7
     * days, as Kafka expires idle groups; zero: never; else 1 min .. 3650 days). A group that nobody reads any more
     * would otherwise hold its queue's retention back for good (retention waits for every group). Its cursors, dead
     * letters and waiting redeliveries go with it, with an INFO line and the counter {@code queen.groups.expired}; a
     * later pop with its name creates it anew, starting as its subscription mode says. Not removed: the queue's
     * default group (a work queue's only cursor), and the groups of connectors that exist, paused ones included. A
     * node records its groups' activity in memory and writes it at most once a minute per group, so this costs the
     * consume path nothing.
     */
    public Builder groupIdleExpiry(Duration idle) {
      this.groupIdleExpiry = Objects.requireNonNull(idle, "groupIdleExpiry must not be null");
      return this;
    }

    /**
     * Serve the HTTP surface and the operator's dashboard from this node (off unless given): see
     * {@link io.queen.embedded.http.HttpOptions}. The server runs on daemon threads of the node and closes with it.
     */
    public Builder http(io.queen.embedded.http.HttpOptions options) {
      this.http = Objects.requireNonNull(options, "http must not be null");
      return this;
    }

    /**
     * Validates every option, migrates the schema and starts the node.
     *
     * @throws IllegalArgumentException an option is invalid, or {@link #connectors} were given
     *     that no connector module on the classpath reads (nothing was started)
     * @throws io.queen.DatabaseLoginException PostgreSQL refused the login (either form)
     * @throws io.queen.QueenDatabaseException the database could not be reached or failed
     * @throws io.queen.NodeIdInUseException another live node holds this {@link #nodeId}
     */
    public Queen start() {
      return QueenImpl.start(build());
    }

    QueenConfig build() {
      List<String> errors = new ArrayList<>();
      if ((dataSource == null) == (jdbcUrl == null)) {
        errors.add("give exactly one of dataSource(...) or jdbcUrl(...)");
      }
      if (jdbcUrl != null && !jdbcUrl.startsWith("jdbc:postgresql:")) {
        errors.add("jdbcUrl must start with 'jdbc:postgresql:'");
      }
      if (poolSize < 2 || poolSize > 200) {
        errors.add("poolSize must be 2..200, was " + poolSize);
      } else if (poolSizeSet && dataSource != null) {
        errors.add("poolSize sizes the pool Queen opens with jdbcUrl(...); with dataSource(...) size your own pool");
      }
      if (!SCHEMA.matcher(schema).matches()) {
        errors.add("schema '" + schema + "' is invalid: allowed is " + SCHEMA.pattern());
      }
      String node = nodeId != null ? nodeId : randomNodeId();
      if (!NODE.matcher(node).matches()) {
        errors.add("nodeId '" + node + "' is invalid: allowed is " + NODE.pattern());
      }
      between(errors, "pollInterval", pollInterval, Duration.ofMillis(10), Duration.ofSeconds(60));
      between(errors, "closeGracePeriod", closeGrace, Duration.ZERO, Duration.ofMinutes(10));
      if (kvMaxReadBytes < 64 * 1024 || kvMaxReadBytes > 256L * 1024 * 1024) {
        errors.add("kvMaxReadBytes must be 65536..268435456, was " + kvMaxReadBytes);
      }
      if (maxPayloadBytes < 1024 || maxPayloadBytes > MAX_PAYLOAD_BYTES_LIMIT) {
        errors.add("maxPayloadBytes must be 1024.." + MAX_PAYLOAD_BYTES_LIMIT + ", was " + maxPayloadBytes);
      }
      between(errors, "connectTimeout", connectTimeout, Duration.ofMillis(250), Duration.ofMinutes(5));
      between(errors, "sessionTimeout", sessionTimeout, MIN_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT);
      between(errors, "pushReceiptRetention", pushReceiptRetention, MIN_PUSH_RECEIPT_RETENTION,
          MAX_PUSH_RECEIPT_RETENTION);
      if (!groupIdleExpiry.isZero() && (groupIdleExpiry.compareTo(Duration.ofMinutes(1)) < 0
          || groupIdleExpiry.compareTo(Duration.ofDays(3650)) > 0)) {
        errors.add("groupIdleExpiry must be 0 (never) or between 1 min and 3650 days, was " + human(groupIdleExpiry));
      }
      if (!removeEmptyPartitionsAfter.isZero() && (removeEmptyPartitionsAfter.compareTo(Duration.ofMinutes(1)) < 0
          || removeEmptyPartitionsAfter.compareTo(Duration.ofDays(365)) > 0)) {
        errors.add("removeEmptyPartitionsAfter must be 0 (never) or between 1 min and 365 days, was "
            + human(removeEmptyPartitionsAfter));
      }
      String keyHex = encryptionKeySet ? encryptionKey : System.getenv(ENCRYPTION_KEY_ENV);
      byte[] key = null;
      if (keyHex != null) {
        if (!keyHex.matches("[0-9a-fA-F]{64}")) {
          errors.add("encryptionKey must be 64 hex digits (32 bytes, e.g. openssl rand -hex 32), was " + keyHex.length()
              + " character(s)" + (encryptionKeySet ? "" : " (from " + ENCRYPTION_KEY_ENV + ")"));
        } else {
          key = java.util.HexFormat.of().parseHex(keyHex);
        }
      }
      errors.addAll(typeErrors);
      List<byte[]> old = new ArrayList<>();
      List<String> oldHex = oldKeys;
      if (oldHex == null) {
        String env = System.getenv(OLD_ENCRYPTION_KEYS_ENV);
        oldHex = env == null || env.isBlank() ? List.of() : List.of(env.split(","));
      }
      for (int i = 0; i < oldHex.size(); i++) {
        String h = oldHex.get(i) == null ? "" : oldHex.get(i).trim();
        if (!h.matches("[0-9a-fA-F]{64}")) {
          errors.add("oldEncryptionKeys[" + i + "] must be 64 hex digits, was " + h.length() + " character(s)"
              + (oldKeys != null ? "" : " (from " + OLD_ENCRYPTION_KEYS_ENV + ")"));
        } else {
          old.add(java.util.HexFormat.of().parseHex(h));
        }
      }
      if (!old.isEmpty() && key == null && keyHex == null) {
        errors.add("oldEncryptionKeys needs an encryptionKey (the key new payloads are sealed with)");
      }
      if (adoptEncryptionKey && key == null && keyHex == null) {
        errors.add("adoptEncryptionKey needs an encryptionKey (the key to adopt)");
      }
      if (connectors != null) {
        errors.addAll(connectors.problems());
      }
      if (!horizonWarnAfter.isZero() && (horizonWarnAfter.compareTo(Duration.ofSeconds(1)) < 0
          || horizonWarnAfter.compareTo(Duration.ofDays(1)) > 0)) {
        errors.add("horizonWarnAfter must be 0 (off) or between 1 s and 1 day, was " + human(horizonWarnAfter));
      }
      meterTagErrors(errors, meterTags);
      if (http != null) {
        errors.addAll(http.problems());
      }
      if (!errors.isEmpty()) {
        throw new IllegalArgumentException((errors.size() == 1 ? "" : errors.size() + " invalid options: ")
            + String.join("; ", errors));
      }
      return new QueenConfig(
          new ConnectionConfig(dataSource, jdbcUrl, user, password, poolSize, connectTimeout, schema),
          new NodeConfig(node, threadFactory, sessionTimeout, closeGrace, pollInterval, listen),
          new PayloadConfig(objectMapper != null ? objectMapper : new ObjectMapper().findAndRegisterModules(),
              maxPayloadBytes, kvMaxReadBytes, payloadTypes.build()),
          new EncryptionConfig(key, old, adoptEncryptionKey), new MetricsConfig(meterRegistry, meterTags),
          new HousekeepingConfig(janitor, pushReceiptRetention, removeEmptyPartitionsAfter, groupIdleExpiry,
              horizonWarnAfter),
          http, connectors);
    }

    /** Queen's own tag keys: a common tag may not take one of them. */
    private static final Set<String> OWN_TAG_KEYS = Set.of("queue", "group", "outcome", "connector");

    private static void meterTagErrors(List<String> errors, List<String> kv) {
      if (kv.size() % 2 != 0) {
        errors.add("meterTags must be key/value pairs, was " + kv.size() + " string(s)");
        return;
      }
      Set<String> seen = new java.util.HashSet<>();
      for (int i = 0; i < kv.size(); i += 2) {
        String k = kv.get(i);
        String v = kv.get(i + 1);
        if (k == null || !k.matches("[A-Za-z][A-Za-z0-9._-]{0,63}")) {
          errors.add("meterTags key " + (i / 2) + " must match [A-Za-z][A-Za-z0-9._-]{0,63}, was "
              + (k == null ? "null" : "'" + (k.length() > 64 ? k.substring(0, 61) + "..." : k) + "'"));
        } else if (OWN_TAG_KEYS.contains(k)) {
          errors.add("meterTags key '" + k + "' is one of Queen's own tags " + new java.util.TreeSet<>(OWN_TAG_KEYS));
        } else if (!seen.add(k)) {
          errors.add("meterTags key '" + k + "' is given twice");
        }
        if (v == null || v.isEmpty() || v.length() > 256) {
          errors.add("meterTags value of key " + (i / 2) + " must be 1..256 characters, was "
              + (v == null ? "null" : v.length() + " character(s)"));
        }
      }
    }

    /**
     * A fresh node id: {@code n} and 16 hex digits from a {@link java.security.SecureRandom} (64 random
     * bits), so that nodes never share an id by chance: leases, status and the connectors' ownership name the
     * node.
     */
    static String randomNodeId() {
      return "n" + String.format("%016x", RANDOM.nextLong());
    }

    private static void between(List<String> errors, String field, Duration d, Duration min, Duration max) {
      if (d.compareTo(min) < 0 || d.compareTo(max) > 0) {
        errors.add(field + " must be between " + human(min) + " and " + human(max) + ", was " + human(d));
      }
    }

    /** 10 ms, 60 s, 10 min, 24 h, 30 days: as the documentation writes durations. */
    static String human(Duration d) {
      long ms = d.toMillis();
      if (ms % 86_400_000 == 0 && ms > 86_400_000) {
        return ms / 86_400_000 + " days";
      }
      if (ms % 3_600_000 == 0 && ms > 3_600_000) {
        return ms / 3_600_000 + " h";
      }
      if (ms % 60_000 == 0 && ms > 60_000) {
        return ms / 60_000 + " min";
      }
      if (ms % 1000 == 0) {
        return ms / 1000 + " s";
      }
      return ms + " ms";
    }
  }
}
