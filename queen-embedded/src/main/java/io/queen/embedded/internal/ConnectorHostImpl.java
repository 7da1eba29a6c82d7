package io.queen.embedded.internal;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.Kv;
import io.queen.PayloadTypes;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.internal.consume.ConsumerBuilderImpl;
import io.queen.embedded.internal.consume.ConsumerNode;
import io.queen.embedded.internal.config.EncryptionConfig;
import io.queen.embedded.internal.config.NodeConfig;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.ops.MetricsSwitch;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConnectorSettings;
import io.queen.embedded.spi.ConsumeSpec;
import io.queen.embedded.spi.OwnedBatchHandler;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import javax.sql.DataSource;

/**
 * The node as the connector SPI sees it: the public node, the parts of its configuration a connector reads (its id,
 * schema, payload types, key, close grace and the module's own settings), its consume side (log, threads,
 * scheduler), the connectors' KV and the metrics.
 */
public final class ConnectorHostImpl implements ConnectorHost {
  private final Queen queen;
  private final String schema;
  private final NodeConfig config;
  private final PayloadTypes payloadTypes;
  private final EncryptionConfig encryption;
  private final ConnectorSettings settings;
  private final ConsumerNode node;
  private final Kv kv;
  private final MetricsSwitch metrics;

  ConnectorHostImpl(Queen queen, String schema, NodeConfig config, PayloadTypes payloadTypes,
      EncryptionConfig encryption, ConnectorSettings settings, ConsumerNode node, Kv connectorKv,
      MetricsSwitch metrics) {
    this.queen = queen;
    this.schema = schema;
    this.config = config;
    this.payloadTypes = payloadTypes;
    this.encryption = encryption;
    this.settings = settings;
    this.node = node;
    this.kv = connectorKv;
    this.metrics = metrics;
  }

  @Override
  public Queen queen() {
    return queen;
  }

  @Override
  public Kv kv() {
    return kv;
  }

  @Override
  public String nodeId() {
    return config.nodeId();
  }

  @Override
  public String schema() {
    return schema;
  }

  @Override
  public DataSource dataSource() {
    return node.broker().dataSource();
  }

  @Override
  public ObjectMapper mapper() {
    return node.broker().codec().mapper();
  }

  @Override
  public PayloadTypes payloadTypes() {
    return payloadTypes;
  }

  @Override
  public ScheduledExecutorService scheduler() {
    return node.scheduler();
  }

  @Override
  public Thread newThread(String role, Runnable r) {
    return node.newDaemon(role, r);
  }

  @Override
  public Optional<byte[]> encryptionKey() {
    byte[] k = encryption.key();
    return k == null ? Optional.empty() : Optional.of(k.clone());
  }

  @Override
  public ConnectorSettings settings() {
    return settings;
  }

  @Override
  public Duration closeGrace() {
    return config.closeGrace();
  }

  @Override
  public Object meterRegistry() {
    return metrics.registry();
  }

  @Override
  public void holdGroup(String queue, String group) {
    node.broker().activity().touch(queue, group);
  }

  @Override
  public Subscription consume(ConsumeSpec spec, OwnedBatchHandler handler) {
    ConsumerBuilderImpl b = (ConsumerBuilderImpl) queen.queue(spec.queue()).group(spec.group());
    b.batch(spec.batch()).concurrency(spec.workers()).subscription(spec.mode());
    if (spec.from() != null) {
      b.subscriptionFrom(spec.from());
    }
    if (spec.leaseTime() != null) {
      b.leaseTime(spec.leaseTime());
    }
    return b.consumeOwned(handler, spec.threadRole(), spec.expiryCounts());
  }

  @Override
  public String describe(Throwable t) {
    return Sql.describe(t);
  }

  @Override
  public boolean isTransient(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof SQLException se && (Sql.isTransient(se) || Sql.isConnectionLoss(se))) {
        return true;
      }
      if (c instanceof java.io.IOException) {
        return true;
      }
      if (c instanceof io.queen.QueenDatabaseException qe && qe.isTransient()) {
        return true;
      }
    }
    return false;
  }

  @Override
  public <T> T inTransaction(SqlWork<T> work) {
    return Sql.inTransaction(node.broker().dataSource(), "connector", work::run);
  }
}
