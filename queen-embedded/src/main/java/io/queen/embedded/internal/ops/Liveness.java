package io.queen.embedded.internal.ops;

import io.queen.NodeIdInUseException;
import io.queen.Queen;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Wakeups;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's row in {@code <schema>.nodes}: registration at start (static
 * membership), the heartbeat, and the row's removal on close.
 *
 * <ul>
 *   <li><b>Register.</b> No row: insert one. A row whose {@code dead_after} has passed (a crashed or stopped
 *       predecessor with this id): take it over with a new incarnation and expire, in the same transaction,
 *       the leases it still names ({@code lease_expires_at = now()}), so the next pop of any node takes them
 *       and counts one attempt, as for any expired lease. A live row: wait, polling, until its heartbeat goes
 *       stale (then take it over) or moves (a live node: refuse with {@link NodeIdInUseException}), at most
 *       this node's session timeout plus one heartbeat interval and a second.</li>
 *   <li><b>Heartbeat.</b> A daemon thread ({@code queen-<node>-heartbeat-<n>}) holds a connection of its own
 *       (borrowed once and kept, like the listener's, so a busy pool or a slow handler cannot delay a beat),
 *       with {@code statement_timeout} = the interval, a client-side network timeout of twice the interval (a
 *       backend that stops answering is left for a new connection, before other nodes take this live node for
 *       dead) and {@code synchronous_commit = off} (a beat lost to a database crash only makes the node look dead
 *       sooner). Each beat sets {@code heartbeat_at} and
 *       {@code dead_after} from {@code clock_timestamp()}, for this incarnation only. When the row has
 *       been taken over by another process (this one was paused past its session timeout), it logs one
 *       ERROR and stops beating.</li>
 *   <li><b>Close.</b> Stops the thread and deletes this incarnation's row, so a clean restart with the same
 *       id starts at once.</li>
 * </ul>
 */
public final class Liveness {
  private static final Logger LOG = LoggerFactory.getLogger(Liveness.class);
  /** Rows of nodes whose heartbeat is older than this are removed by the janitor. */
  public static final Duration FORGET_AFTER = Duration.ofDays(1);

  private final DataSource ds;
  private final String s;
  private final String node;
  private final Duration sessionTimeout;
  private final Duration interval;
  private final UUID incarnation = UUID.randomUUID();
  private volatile boolean running;
  private volatile boolean takenOver;
  private volatile Thread thread;
  /** The network timeout the heartbeat's connection had when it was borrowed (heartbeat thread only). */
  private int networkTimeoutBefore;
  /** Told after each beat whether another node of the schema is alive. */
  private volatile java.util.function.Consumer<Boolean> othersAlive = alive -> { };

  public Liveness(DataSource ds, String quotedSchema, String node, Duration sessionTimeout, Duration interval) {
    this.ds = ds;
    this.s = quotedSchema;
    this.node = node;
    this.sessionTimeout = sessionTimeout;
    this.interval = interval;
  }

  private record Seen(boolean registered, int expired, long ageMs, java.sql.Timestamp heartbeatAt) {}

  /**
   * Registers this node (see the class comment). Returns how many leases of a dead predecessor with the
   * same id were expired.
   *
   * @throws NodeIdInUseException a live node holds the id
   */
  public int register() {
    long started = System.nanoTime();
    long budget = sessionTimeout.plus(interval).plusSeconds(1).toNanos();
    java.sql.Timestamp firstSeen = null;
    boolean said = false;
    while (true) {
      Seen seen = Sql.inTransaction(ds, "register node", this::tryRegister);
      if (seen.registered()) {
        if (seen.heartbeatAt() != null) {
          LOG.info("{} - took over the node id from a predecessor whose heartbeat stopped {} ms ago; expired its {}"
              + " lease(s): other consumers take them now, each counted as one attempt", node, seen.ageMs(), seen.expired());
        }
        return seen.expired();
      }
      long waited = System.nanoTime() - started;
      if (firstSeen == null) {
        firstSeen = seen.heartbeatAt();
      } else if (!firstSeen.equals(seen.heartbeatAt()) || waited > budget) {
        throw new NodeIdInUseException(node, Duration.ofMillis(seen.ageMs()), Duration.ofNanos(waited));
      }
      if (!said) {
        said = true;
        LOG.info("{} - the node id is held by a node whose heartbeat is {} ms old: waiting up to {} ms for it to go"
            + " stale (a crashed predecessor) or to move (a live node: refused)", node, seen.ageMs(),
            TimeUnit.NANOSECONDS.toMillis(budget));
      }
      try {
        TimeUnit.MILLISECONDS.sleep(Math.min(250, interval.toMillis()));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new NodeIdInUseException(node, Duration.ofMillis(seen.ageMs()), Duration.ofNanos(System.nanoTime() - started));
      }
    }
  }

  private Seen tryRegister(Connection c) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("select heartbeat_at, dead_after <= clock_timestamp(),"
        + " (extract(epoch from clock_timestamp() - heartbeat_at) * 1000)::bigint from " + s + ".nodes"
        + " where node_id = ? for update")) {
      st.setString(1, node);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          return new Seen(insert(c) == 1, 0, 0, null);
        }
        java.sql.Timestamp hb = rs.getTimestamp(1);
        boolean dead = rs.getBoolean(2);
        long age = rs.getLong(3);
        if (!dead) {
          return new Seen(false, 0, age, hb);
        }
        try (PreparedStatement up = c.prepareStatement("update " + s + ".nodes set incarnation = ?,"
            + " started_at = clock_timestamp(), heartbeat_at = clock_timestamp(),"
            + " dead_after = clock_timestamp() + ? * interval '1 millisecond', session_timeout_ms = ?, version = ?,"
            + " pid = ? where node_id = ?")) {
          up.setObject(1, incarnation);
          up.setLong(2, sessionTimeout.toMillis());
          up.setLong(3, sessionTimeout.toMillis());
          up.setString(4, Queen.version());
          up.setLong(5, ProcessHandle.current().pid());
          up.setString(6, node);
          up.executeUpdate();
        }
        // the predecessor's leases would look live again under this node's fresh heartbeat: expire them, so
        // the next pop takes them (one attempt each, like any expired lease) and the predecessor's acks, if it
        // is only paused, report LEASE_LOST. Scans cursors (no index on lease_owner: start is rare, and an
        // index would cost every pop a write).
        int expired;
        try (PreparedStatement ex = c.prepareStatement("with mine as (select partition_id, group_name from " + s
            + ".cursors where lease_owner = ? and lease_id is not null and lease_expires_at > now()"
            + " order by partition_id, group_name for update)" // key order, as every multi-row lock
            + " update " + s + ".cursors cu set lease_expires_at = now() from mine m"
            + " where cu.partition_id = m.partition_id and cu.group_name = m.group_name")) {
          ex.setString(1, node);
          expired = ex.executeUpdate();
        }
        return new Seen(true, expired, age, hb);
      }
    }
  }

  private int insert(Connection c) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("insert into " + s + ".nodes(node_id, incarnation, started_at,"
        + " heartbeat_at, dead_after, session_timeout_ms, version, pid) values (?, ?, clock_timestamp(), clock_timestamp(),"
        + " clock_timestamp() + ? * interval '1 millisecond', ?, ?, ?) on conflict (node_id) do nothing")) {
      st.setString(1, node);
      st.setObject(2, incarnation);
      st.setLong(3, sessionTimeout.toMillis());
      st.setLong(4, sessionTimeout.toMillis());
      st.setString(5, Queen.version());
      st.setLong(6, ProcessHandle.current().pid());
      return st.executeUpdate();
    }
  }

  /** Where each beat reports whether another node of the schema is alive (a stale row does not count). */
  public void onOthersAlive(java.util.function.Consumer<Boolean> listener) {
    this.othersAlive = listener;
  }

  /** Starts the heartbeat thread. */
  public void start(Wakeups.ThreadFactory threads) {
    running = true;
    Thread t = threads.newThread("heartbeat", this::loop);
    thread = t;
    t.start();
  }

  private void loop() {
    Connection c = null;
    long failingSince = 0;
    while (running) {
      long t0 = System.nanoTime();
      if (!takenOver) {
        try {
          if (c == null) {
            c = ds.getConnection();
            c.setAutoCommit(true);
            // a backend that stops answering (stopped, swapped out, a half-open socket) must not hold the beat up
            // until other nodes take this live node for dead: the beat gives up client-side too, and the next one
            // goes through a new connection
            networkTimeoutBefore = c.getNetworkTimeout();
            c.setNetworkTimeout(Runnable::run, (int) networkTimeout().toMillis());
            try (Statement st = c.createStatement()) {
              st.execute("set statement_timeout = " + Math.max(100, interval.toMillis()));
              st.execute("set synchronous_commit = off");
            }
          }
          beat(c);
          if (failingSince != 0) {
            LOG.info("{} - heartbeat is back after {} ms", node, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - failingSince));
            failingSince = 0;
          }
        } catch (SQLException | RuntimeException e) {
          giveBack(c);
          c = null;
          if (!running) {
            break;
          }
          if (failingSince == 0) {
            failingSince = System.nanoTime();
            LOG.warn("{} - heartbeat failed ({}); once it is {} old, other nodes take this node's leases", node,
                Sql.describe(e), sessionTimeout);
          }
        }
      }
      long sleep = interval.toNanos() - (System.nanoTime() - t0);
      if (sleep > 0) {
        try {
          TimeUnit.NANOSECONDS.sleep(sleep);
        } catch (InterruptedException e) {
          if (!running) {
            break;
          }
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    giveBack(c);
  }

  private void beat(Connection c) throws SQLException {
    try (PreparedStatement st = c.prepareStatement("update " + s + ".nodes set heartbeat_at = clock_timestamp(),"
        + " dead_after = clock_timestamp() + session_timeout_ms * interval '1 millisecond'"
        + " where node_id = ? and incarnation = ? returning exists (select 1 from " + s + ".nodes o"
        + " where o.node_id <> ? and o.dead_after > clock_timestamp())")) {
      st.setString(1, node);
      st.setObject(2, incarnation);
      st.setString(3, node);
      try (java.sql.ResultSet rs = st.executeQuery()) {
        if (rs.next()) {
          othersAlive.accept(rs.getBoolean(1));
          return;
        }
      }
    }
    // the row is gone (removed by hand) or belongs to another incarnation (this process was taken for dead)
    if (insert(c) == 1) {
      LOG.warn("{} - this node's row in nodes was removed; registered it again", node);
      return;
    }
    takenOver = true;
    LOG.error("{} - the node id was taken over by another process (this node's heartbeat was seen stale: a pause"
        + " longer than the session timeout {}?); its leases were expired and its acks of them report LEASE_LOST."
        + " This node stops heartbeating: close it", node, sessionTimeout);
  }

  /**
   * How long a beat waits for the database on its socket: twice the interval, at least a second. A beat stuck that long
   * plus the next one on a new connection take three fifths of the session timeout (at the 2 s minimum timeout, 1.4 s
   * of it).
   */
  Duration networkTimeout() {
    Duration twice = interval.multipliedBy(2);
    return twice.compareTo(Duration.ofSeconds(1)) < 0 ? Duration.ofSeconds(1) : twice;
  }

  /** Resets what the heartbeat set on the connection and returns it to the pool. */
  private void giveBack(Connection c) {
    if (c == null) {
      return;
    }
    try {
      c.setNetworkTimeout(Runnable::run, networkTimeoutBefore); // the pool's own (its URL's socketTimeout)
    } catch (SQLException | RuntimeException ignored) {
      // closed by the timeout itself: the pool discards it
    }
    try (Statement st = c.createStatement()) {
      st.execute("reset statement_timeout");
      st.execute("reset synchronous_commit");
    } catch (SQLException | RuntimeException ignored) {
      // broken: the pool discards it
    }
    try {
      c.close();
    } catch (SQLException ignored) {
      // nothing to do
    }
  }

  /** Stops the heartbeat and deletes this incarnation's row (bounded; a failure is logged). */
  public void close() {
    running = false;
    Thread t = thread;
    if (t != null) {
      t.interrupt();
      try {
        t.join(2_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    try {
      Sql.autoCommit(ds, "remove node", c -> {
        try (PreparedStatement st = c.prepareStatement("delete from " + s + ".nodes where node_id = ? and incarnation = ?")) {
          st.setQueryTimeout(2);
          st.setString(1, node);
          st.setObject(2, incarnation);
          return st.executeUpdate();
        }
      });
    } catch (RuntimeException e) {
      LOG.warn("{} - could not remove this node's row on close ({}); the id is free once its heartbeat is {} old", node,
          Sql.describe(e), sessionTimeout);
    }
  }

  /** Janitor: removes rows of nodes whose heartbeat is older than a day. */
  public static int forgetOldNodes(DataSource ds, String quotedSchema) {
    return Sql.autoCommit(ds, "forget old nodes", c -> {
      try (PreparedStatement st = c.prepareStatement("delete from " + quotedSchema + ".nodes"
          + " where heartbeat_at < now() - ? * interval '1 millisecond'")) {
        st.setLong(1, FORGET_AFTER.toMillis());
        return st.executeUpdate();
      }
    });
  }

  /** This start's incarnation (the row's {@code incarnation}). */
  public UUID incarnation() {
    return incarnation;
  }
}
