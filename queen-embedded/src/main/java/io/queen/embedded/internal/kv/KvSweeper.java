package io.queen.embedded.internal.kv;

import io.queen.embedded.internal.db.Sql;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Objects;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Removes expired KV rows in small batches. Expired rows are already invisible (every read and write
 * treats them as absent), so the sweeper only reclaims space and may run late without changing any
 * answer.
 *
 * <p>One node at a time: each batch is its own short transaction that first takes
 * {@code pg_try_advisory_xact_lock} on a key derived from the schema; a node that does not get it
 * stops its round at once (another node is sweeping). Rows a writer holds are skipped
 * ({@code for update skip locked}), so the sweeper never waits for, nor blocks, a writer.
 *
 * <p>{@link #run()} does one round and never throws, so the node's janitor can schedule it at a fixed
 * delay (for example every 10 s). Thread-safe, but meant for one janitor thread.
 */
public final class KvSweeper implements Runnable {
  /** Default rows per batch. */
  public static final int DEFAULT_BATCH = 500;
  /**
   * Default batches per round: up to 100,000 rows a round (a batch of 500 took ~4 ms), so with a round every 5 s the
   * sweeper keeps up with about 17,000 expiring keys a second; 20 batches (2,000 a second) fell behind a consumer
   * writing a marker per message.
   */
  public static final int DEFAULT_MAX_BATCHES = 200;
  /** First key of the two-key advisory lock: "QUEE". */
  static final int LOCK_CLASS = 0x51554545;

  private static final Logger LOG = LoggerFactory.getLogger(KvSweeper.class);

  private final DataSource ds;
  private final String schemaName;
  /** What log lines start with: the node id for a node's sweeper, else the schema. */
  private final String logName;
  private final int batch;
  private final int maxBatches;
  private final String sweepSql;
  private final String lockSql;

  public KvSweeper(DataSource ds, String schema) {
    this(ds, schema, DEFAULT_BATCH, DEFAULT_MAX_BATCHES);
  }

  /** A node's sweeper: its log lines start with the node id, as the node's other lines do. */
  public KvSweeper(DataSource ds, String schema, String nodeId) {
    this(ds, schema, DEFAULT_BATCH, DEFAULT_MAX_BATCHES, Objects.requireNonNull(nodeId, "nodeId must not be null"));
  }

  /**
   * @param batch rows per batch (1..10,000)
   * @param maxBatches batches per round (at least 1)
   */
  public KvSweeper(DataSource ds, String schema, int batch, int maxBatches) {
    this(ds, schema, batch, maxBatches, schema);
  }

  private KvSweeper(DataSource ds, String schema, int batch, int maxBatches, String logName) {
    this.ds = Objects.requireNonNull(ds, "ds must not be null");
    this.schemaName = Objects.requireNonNull(schema, "schema must not be null");
    this.logName = logName;
    if (batch < 1 || batch > 10_000) {
      throw new IllegalArgumentException("batch must be 1..10000, was " + batch);
    }
    if (maxBatches < 1) {
      throw new IllegalArgumentException("maxBatches must be at least 1, was " + maxBatches);
    }
    this.batch = batch;
    this.maxBatches = maxBatches;
    this.sweepSql = "select " + Sql.quoteIdent(schema) + ".kv_sweep(?)";
    this.lockSql = "select pg_try_advisory_xact_lock(" + LOCK_CLASS + ", hashtext(?))";
  }

  /**
   * Deletes up to {@code batch} expired rows on {@code c}, inside whatever transaction it is in (no
   * lock taken); returns how many.
   */
  public int sweep(Connection c, int batch) throws SQLException {
    try (PreparedStatement st = c.prepareStatement(sweepSql)) {
      st.setInt(1, batch);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    }
  }

  /**
   * Takes this schema's sweeper lock for the rest of {@code c}'s transaction (auto-commit must be off);
   * false when another node holds it.
   */
  public boolean tryLock(Connection c) throws SQLException {
    try (PreparedStatement st = c.prepareStatement(lockSql)) {
      st.setString(1, "queen.kv-sweeper:" + schemaName);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }

  /**
   * One round: batches of at most {@code batch} rows, each in its own transaction under the lock, until
   * a batch comes back short, {@code maxBatches} ran, or another node holds the lock.
   *
   * @return rows removed, or -1 when another node was sweeping and this one removed nothing
   */
  public int sweepRound() {
    int total = 0;
    for (int i = 0; i < maxBatches; i++) {
      Integer n = Sql.inTransaction(ds, "kv.sweep", c -> tryLock(c) ? sweep(c, batch) : null);
      if (n == null) {
        return i == 0 ? -1 : total;
      }
      total += n;
      if (n < batch || Thread.currentThread().isInterrupted()) {
        break;
      }
    }
    return total;
  }

  /** {@link #sweepRound()}, logging instead of throwing (for a scheduled janitor). */
  @Override
  public void run() {
    try {
      int n = sweepRound();
      if (n > 0) {
        LOG.debug("{} - kv sweeper removed {} expired rows", logName, n);
      }
      if (failingSince != 0) {
        LOG.info("{} - kv sweeper works again after {} s", logName, (System.nanoTime() - failingSince) / 1_000_000_000L);
        failingSince = 0;
      }
    } catch (RuntimeException e) {
      if (failingSince == 0) {
        failingSince = System.nanoTime();
        LOG.warn("{} - kv sweeper round failed ({}); the next rounds retry every 5 s, quietly until one works",
            logName, Sql.describe(e));
      } else {
        LOG.debug("{} - kv sweeper round failed again: {}", logName, Sql.describe(e));
      }
    }
  }

  /** When rounds started failing (System.nanoTime()), 0 while they work; rounds run on one scheduler thread. */
  private long failingSince;
}
