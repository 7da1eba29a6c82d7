package io.queen.embedded;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.Queen;
import io.queen.embedded.internal.QueenConfig;
import io.queen.embedded.internal.QueenImpl;
import java.time.Duration;
import java.util.Objects;
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
 * nodes starting together do not collide), and starts the node's daemon threads: one LISTEN connection
 * for wake-ups and the janitor. Consumer threads start only with {@code consume(...)}: a process that
 * only pushes runs none.
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

  private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();
  private static final Pattern SCHEMA = Pattern.compile("[a-z_][a-z0-9_]{0,62}");
  private static final Pattern NODE = Pattern.compile("[A-Za-z0-9._-]{1,64}");

  private EmbeddedQueen() {}

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
    private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
    private Duration connectTimeout = DEFAULT_CONNECT_TIMEOUT;

    private Builder() {}

    /** The application's DataSource. Queen borrows connections and never closes it. */
    public Builder dataSource(DataSource dataSource) {
      this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
      return this;
    }

    /** Instead of a DataSource: Queen opens (and on close, closes) its own HikariCP pool. */
    public Builder jdbcUrl(String url, String user, String password) {
      this.jdbcUrl = Objects.requireNonNull(url, "url");
      this.user = user;
      this.password = password;
      return this;
    }

    /** Size of the pool Queen opens with {@link #jdbcUrl} (2..200; default 10). */
    public Builder poolSize(int size) {
      this.poolSize = size;
      return this;
    }

    /** The schema that holds Queen's tables (lower-case identifier; default {@value #DEFAULT_SCHEMA}). */
    public Builder schema(String schema) {
      this.schema = Objects.requireNonNull(schema, "schema");
      return this;
    }

    /**
     * This node's id ({@code [A-Za-z0-9._-]{1,64}}); default: a random one ({@code n} + 16 hex digits, 64
     * random bits).
     */
    public Builder nodeId(String nodeId) {
      this.nodeId = Objects.requireNonNull(nodeId, "nodeId");
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
      this.objectMapper = Objects.requireNonNull(mapper, "objectMapper");
      return this;
    }

    /** Factory for consumer worker threads (named by Queen; made daemon unless the factory decides). */
    public Builder threadFactory(ThreadFactory factory) {
      this.threadFactory = Objects.requireNonNull(factory, "threadFactory");
      return this;
    }

    /** Bound on how long a waiting pop sleeps between polls (10 ms .. 60 s; default 500 ms). */
    public Builder pollInterval(Duration interval) {
      this.pollInterval = Objects.requireNonNull(interval, "pollInterval");
      return this;
    }

    /** Grace period of {@link Queen#close()} for running handlers (0 .. 10 min; default 10 s). */
    public Builder closeGracePeriod(Duration grace) {
      this.closeGrace = Objects.requireNonNull(grace, "closeGracePeriod");
      return this;
    }

    /** Whether to hold a LISTEN connection for wake-ups (default true; without it, waiters poll). */
    public Builder listen(boolean listen) {
      this.listen = listen;
      return this;
    }

    /** Whether this node runs the janitor (KV sweeper); default true. */
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
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry");
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
      this.connectTimeout = Objects.requireNonNull(timeout, "connectTimeout");
      return this;
    }

    /**
     * Validates every option, migrates the schema and starts the node.
     *
     * @throws IllegalArgumentException an option is invalid (nothing was started)
     * @throws io.queen.DatabaseLoginException PostgreSQL refused the login (either form)
     * @throws io.queen.QueenDatabaseException the database could not be reached or failed
     */
    public Queen start() {
      return QueenImpl.start(build());
    }

    QueenConfig build() {
      if ((dataSource == null) == (jdbcUrl == null)) {
        throw new IllegalArgumentException("give exactly one of dataSource(...) or jdbcUrl(...)");
      }
      if (jdbcUrl != null && !jdbcUrl.startsWith("jdbc:postgresql:")) {
        throw new IllegalArgumentException("jdbcUrl must start with 'jdbc:postgresql:'");
      }
      if (poolSize < 2 || poolSize > 200) {
        throw new IllegalArgumentException("poolSize must be 2..200, was " + poolSize);
      }
      if (!SCHEMA.matcher(schema).matches()) {
        throw new IllegalArgumentException("schema '" + schema + "' is invalid: allowed is " + SCHEMA.pattern());
      }
      String node = nodeId != null ? nodeId : randomNodeId();
      if (!NODE.matcher(node).matches()) {
        throw new IllegalArgumentException("nodeId '" + node + "' is invalid: allowed is " + NODE.pattern());
      }
      between("pollInterval", pollInterval, Duration.ofMillis(10), Duration.ofSeconds(60));
      between("closeGracePeriod", closeGrace, Duration.ZERO, Duration.ofMinutes(10));
      if (kvMaxReadBytes < 64 * 1024 || kvMaxReadBytes > 256L * 1024 * 1024) {
        throw new IllegalArgumentException("kvMaxReadBytes must be 65536..268435456, was " + kvMaxReadBytes);
      }
      if (maxPayloadBytes < 1024 || maxPayloadBytes > MAX_PAYLOAD_BYTES_LIMIT) {
        throw new IllegalArgumentException("maxPayloadBytes must be 1024.." + MAX_PAYLOAD_BYTES_LIMIT + ", was "
            + maxPayloadBytes);
      }
      between("connectTimeout", connectTimeout, Duration.ofMillis(250), Duration.ofMinutes(5));
      return new QueenConfig(dataSource, jdbcUrl, user, password, poolSize, schema, node,
          objectMapper != null ? objectMapper : new ObjectMapper().findAndRegisterModules(), threadFactory,
          pollInterval, closeGrace, listen, janitor, kvMaxReadBytes, meterRegistry, maxPayloadBytes, connectTimeout);
    }

    /**
     * A fresh node id: {@code n} and 16 hex digits from a {@link java.security.SecureRandom} (64 random
     * bits), so that nodes never share an id by chance: leases, status and the connectors' ownership name the
     * node.
     */
    static String randomNodeId() {
      return "n" + String.format("%016x", RANDOM.nextLong());
    }

    private static void between(String field, Duration d, Duration min, Duration max) {
      if (d.compareTo(min) < 0 || d.compareTo(max) > 0) {
        throw new IllegalArgumentException(field + " must be between " + min + " and " + max + ", was " + d);
      }
    }
  }
}
