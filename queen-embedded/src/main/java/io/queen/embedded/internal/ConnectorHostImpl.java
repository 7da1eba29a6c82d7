package io.queen.embedded.internal;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.Kv;
import io.queen.PayloadTypes;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.internal.consume.ConsumerBuilderImpl;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConsumeSpec;
import io.queen.embedded.spi.OwnedBatchHandler;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import javax.sql.DataSource;

/** The node as the connector SPI sees it. */
public final class ConnectorHostImpl implements ConnectorHost {
  private final QueenImpl q;

  ConnectorHostImpl(QueenImpl q) {
    this.q = q;
  }

  @Override
  public Queen queen() {
    return q;
  }

  @Override
  public Kv kv() {
    return q.connectorKv();
  }

  @Override
  public String nodeId() {
    return q.config().nodeId();
  }

  @Override
  public String schema() {
    return q.config().schema();
  }

  @Override
  public DataSource dataSource() {
    return q.dataSource();
  }

  @Override
  public ObjectMapper mapper() {
    return q.codec().mapper();
  }

  @Override
  public PayloadTypes payloadTypes() {
    return q.config().payloadTypes();
  }

  @Override
  public ScheduledExecutorService scheduler() {
    return q.scheduler();
  }

  @Override
  public Thread newThread(String role, Runnable r) {
    return q.newDaemon(role, r);
  }

  @Override
  public Optional<byte[]> encryptionKey() {
    byte[] k = q.config().encryptionKey();
    return k == null ? Optional.empty() : Optional.of(k.clone());
  }

  @Override
  public int connectorThreads() {
    return q.config().connectorThreads();
  }

  @Override
  public boolean runConnectors() {
    return q.config().runConnectors();
  }

  @Override
  public Duration connectorRefresh() {
    return q.config().connectorRefresh();
  }

  @Override
  public Duration sourceLeaseTtl() {
    return q.config().sourceLeaseTtl();
  }

  @Override
  public Duration closeGrace() {
    return q.config().closeGrace();
  }

  @Override
  public Object meterRegistry() {
    return q.metrics().registry();
  }

  @Override
  public void holdGroup(String queue, String group) {
    q.broker().activity().touch(queue, group);
  }

  @Override
  public Subscription consume(ConsumeSpec spec, OwnedBatchHandler handler) {
    ConsumerBuilderImpl b = (ConsumerBuilderImpl) q.queue(spec.queue()).group(spec.group());
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
    return Sql.inTransaction(q.dataSource(), "connector", work::run);
  }
}
