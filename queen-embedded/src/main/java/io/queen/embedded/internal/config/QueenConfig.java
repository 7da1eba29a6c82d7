package io.queen.embedded.internal.config;

import io.queen.embedded.http.HttpOptions;
import io.queen.embedded.spi.ConnectorSettings;
import java.util.Objects;

/**
 * The validated, immutable configuration of one node, as its parts: each part of the node receives the ones it reads.
 *
 * @param http the HTTP surface, or null when the builder did not ask for it
 * @param connectors the connector module's settings: those the builder was given (null when none), and once the node
 *     has found its connector module, those it runs with (still null when there is no module)
 */
public record QueenConfig(ConnectionConfig connection, NodeConfig node, PayloadConfig payload,
    EncryptionConfig encryption, MetricsConfig metrics, HousekeepingConfig housekeeping, HttpOptions http,
    ConnectorSettings connectors) {
  public QueenConfig {
    Objects.requireNonNull(connection, "connection must not be null");
    Objects.requireNonNull(node, "node must not be null");
    Objects.requireNonNull(payload, "payload must not be null");
    Objects.requireNonNull(encryption, "encryption must not be null");
    Objects.requireNonNull(metrics, "metrics must not be null");
    Objects.requireNonNull(housekeeping, "housekeeping must not be null");
  }

  /** This configuration with the connector settings the node runs with. */
  public QueenConfig withConnectors(ConnectorSettings settings) {
    return new QueenConfig(connection, node, payload, encryption, metrics, housekeeping, http, settings);
  }

  /** The node's id (thread names, log lines, leases). */
  public String nodeId() {
    return node.nodeId();
  }

  /** The effective settings for the start-up log line, with the password and the key masked. */
  public String describe() {
    HousekeepingConfig h = housekeeping;
    return "schema=" + connection.schema() + ", node=" + node.nodeId() + ", pool=" + connection.describePool()
        + ", pollInterval=" + node.pollInterval() + ", closeGrace=" + node.closeGrace() + ", listen=" + node.listen()
        + ", janitor=" + h.janitor() + ", kvMaxReadBytes=" + payload.kvMaxReadBytes()
        + ", metrics=" + (metrics.registry() != null) + (metrics.tags().isEmpty() ? "" : " tagged " + metrics.tags())
        + ", maxPayloadBytes=" + payload.maxPayloadBytes() + ", connectTimeout=" + connection.connectTimeout()
        + ", sessionTimeout=" + node.sessionTimeout() + " (heartbeat every " + node.heartbeatInterval() + ")"
        + ", pushReceiptRetention=" + h.pushReceiptRetention()
        + ", removeEmptyPartitionsAfter=" + (h.removeEmptyPartitionsAfter().isZero() ? "never"
        : h.removeEmptyPartitionsAfter())
        + ", horizonWarnAfter=" + (h.horizonWarnAfter().isZero() ? "off" : h.horizonWarnAfter())
        + ", encryptionKey=" + encryption.describe()
        + ", connectors=" + (connectors == null ? "none" : connectors.describe())
        + ", http=" + (http == null ? "off" : http);
  }

  @Override
  public String toString() {
    return "QueenConfig[" + describe() + "]";
  }
}
