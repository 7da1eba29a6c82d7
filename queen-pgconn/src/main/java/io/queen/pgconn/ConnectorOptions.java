package io.queen.pgconn;

import io.queen.embedded.spi.ConnectorSettings;
import io.queen.pgconn.internal.spec.RuntimeOptions;
import java.time.Duration;
import java.util.Objects;

/**
 * How a node runs the connectors of this module, given to the node's builder:
 *
 * <pre>{@code
 * Queen queen = EmbeddedQueen.builder().dataSource(ds)
 *     .connectors(ConnectorOptions.defaults().refresh(Duration.ofSeconds(1)))
 *     .start();
 * }</pre>
 *
 * <p>A node built without them runs with {@link #defaults()}. Every method returns a new value; the node's builder
 * checks them with its other options before anything starts, and refuses them with an
 * {@link IllegalArgumentException} naming each option out of range ({@code ConnectorOptions.refresh must be between
 * 100 ms and 10 min, was 5 ms}).
 *
 * <p>Thread-safe (immutable).
 *
 * @param threads threads of the connector registry, 1..64: it re-reads the documents and starts, stops or restarts the
 *     connectors (a sink's consume loop and a source's stream have threads of their own, {@code queen-<node>-pg-<n>})
 * @param refresh how often the node re-reads the connector documents and starts, stops or restarts its connectors,
 *     100 ms .. 10 min; also how often a failed source tries again, and how old a sink's reading of its table's shape
 *     may get
 * @param run whether this node runs connectors; a node that does not (a producer-only service, a test observer)
 *     still stores and reads the documents through {@code Queen.connectors()}, and their phase reads {@code disabled}
 *     there
 * @param sourceLeaseTtl how long a source's owner holds it without renewing, 1 s .. 10 min: the owner renews it every
 *     third of this, and another node takes over a crashed owner's source after it. Give every node the same
 */
public record ConnectorOptions(int threads, Duration refresh, boolean run, Duration sourceLeaseTtl)
    implements ConnectorSettings, RuntimeOptions {
  /** Default {@link #threads}: {@value}. */
  public static final int DEFAULT_THREADS = RuntimeOptions.DEFAULT_THREADS;
  /** Default {@link #refresh}: 5 s. */
  public static final Duration DEFAULT_REFRESH = RuntimeOptions.DEFAULT_REFRESH;
  /** Default {@link #sourceLeaseTtl}: 10 s. */
  public static final Duration DEFAULT_SOURCE_LEASE_TTL = RuntimeOptions.DEFAULT_SOURCE_LEASE_TTL;

  public ConnectorOptions {
    Objects.requireNonNull(refresh, "refresh must not be null");
    Objects.requireNonNull(sourceLeaseTtl, "sourceLeaseTtl must not be null");
  }

  /** Two threads, a re-read every 5 s, connectors run, a 10 s source lease. */
  public static ConnectorOptions defaults() {
    return new ConnectorOptions(DEFAULT_THREADS, DEFAULT_REFRESH, true, DEFAULT_SOURCE_LEASE_TTL);
  }

  /** These options with {@link #threads} (1..64; default 2). */
  public ConnectorOptions threads(int threads) {
    return new ConnectorOptions(threads, refresh, run, sourceLeaseTtl);
  }

  /** These options with {@link #refresh} (100 ms .. 10 min; default 5 s). */
  public ConnectorOptions refresh(Duration refresh) {
    return new ConnectorOptions(threads, refresh, run, sourceLeaseTtl);
  }

  /** These options with {@link #run} (default true). */
  public ConnectorOptions run(boolean run) {
    return new ConnectorOptions(threads, refresh, run, sourceLeaseTtl);
  }

  /** These options with {@link #sourceLeaseTtl} (1 s .. 10 min; default 10 s). */
  public ConnectorOptions sourceLeaseTtl(Duration ttl) {
    return new ConnectorOptions(threads, refresh, run, ttl);
  }
}
