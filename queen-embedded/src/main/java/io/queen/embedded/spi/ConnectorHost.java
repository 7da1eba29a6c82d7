package io.queen.embedded.spi;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.Kv;
import io.queen.PayloadTypes;
import io.queen.Queen;
import io.queen.Subscription;
import java.sql.Connection;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import javax.sql.DataSource;

/**
 * What a running node offers a connector module. Thread-safe. Every method answers after the node has
 * closed too, but {@link #consume} and work on {@link #queen()} then throw {@link io.queen.BrokerClosedException}
 * (from the start of {@link Queen#close()}), and work on {@link #kv()} once the connectors are closed.
 */
public interface ConnectorHost {
  /** The node itself: push, ack, transactions, KV, dead letters. */
  Queen queen();

  /**
   * The node's KV for the connector's own records (a source's ownership lease): the same entries as
   * {@code queen().kv()}, but it keeps answering while {@link Queen#close()} closes the connectors, so that a
   * connector can give back what it holds; it throws {@link io.queen.BrokerClosedException} once they are closed.
   */
  Kv kv();

  /** This node's id (thread names, owners, status). */
  String nodeId();

  /** Queen's schema (validated lower-case identifier, unquoted). */
  String schema();

  /** Queen's DataSource (the application's, or the pool Queen opened). Never close it. */
  DataSource dataSource();

  /** Queen's ObjectMapper (the one payloads are read with). */
  ObjectMapper mapper();

  /**
   * The node's payload types and upcasters (the builder's {@code payloadType} and {@code upcaster}): the same
   * object {@link io.queen.Message#payload(Class)} reads typed payloads with. A connector that reads payloads
   * without a class brings an older version up with {@link PayloadTypes#readable} to
   * {@link PayloadTypes#newestVersion}.
   */
  PayloadTypes payloadTypes();

  /** The node's scheduler thread: short tasks only. */
  ScheduledExecutorService scheduler();

  /** A daemon thread named {@code queen-<node>-<role>}, not started. */
  Thread newThread(String role, Runnable r);

  /** The node's AES-256 key (32 bytes, a copy), from the builder or {@code QUEEN_ENCRYPTION_KEY}; empty when none. */
  Optional<byte[]> encryptionKey();

  /**
   * The connector module's settings, as its {@link ConnectorProvider#settings} resolved them: those given to the
   * builder's {@code connectors(...)}, else the module's defaults.
   */
  ConnectorSettings settings();

  /** The grace period of {@link Queen#close()}. */
  Duration closeGrace();

  /**
   * The Micrometer {@code MeterRegistry} to register a connector's meters with, or null when the node has none (or
   * its metrics were turned off by a failing meter): the node's own registry over the one given to the builder, so
   * the builder's {@code meterTags} apply, and a removal through it reaches the builder's registry.
   */
  Object meterRegistry();

  /**
   * Starts a consume loop whose batch handler owns its commit and acknowledgements (see
   * {@link OwnedBatchHandler}); closed with {@link Queen#close()} at the latest.
   */
  Subscription consume(ConsumeSpec spec, OwnedBatchHandler handler);

  /**
   * Keeps a consumer group from being removed as idle ({@code groupIdleExpiry}) while the connector that consumes with
   * it exists, running or paused: call it for each such group at least once a day (the registry does on every re-read).
   */
  void holdGroup(String queue, String group);

  /**
   * Describes a failure for a log line or a status without its statement text, parameters or payload:
   * the exception's class, SQLState and PostgreSQL's own message (which names constraints and types but
   * may quote a value), cut to a short length.
   */
  String describe(Throwable t);

  /** Whether {@code c}'s failure {@code t} is transient (class 08, 40001, 40P01, 57P01..57P03, 55P03, I/O). */
  boolean isTransient(Throwable t);

  /** Runs {@code work} on a connection of Queen's DataSource with auto-commit off, and commits it. */
  <T> T inTransaction(SqlWork<T> work);

  /** Work on one connection. */
  @FunctionalInterface
  interface SqlWork<T> {
    T run(Connection c) throws java.sql.SQLException;
  }
}
