package io.queen.embedded.internal.log;

import io.queen.embedded.internal.db.Sql;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import javax.sql.DataSource;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Wakes waiting pops when a queue gets a push: from this JVM directly, from other nodes through one
 * LISTEN connection. Other nodes are told by a notifier thread after the pushing transaction committed
 * (coalesced: one NOTIFY per queue per round), not by a NOTIFY inside the push, because PostgreSQL
 * serialises the commits of notifying transactions. A notification is only a hint: every waiter also wakes after the poll interval,
 * so a lost notification (a dropped listener connection, a pooler) delays a message, never loses it.
 * The listener reconnects by itself, and wakes every waiter after a reconnect. Its connection carries the
 * {@code application_name} {@code queen-<node>-listener} while it listens (see {@link #applicationName}), so an operator
 * finds it in {@code pg_stat_activity}.
 *
 * <p>A wake-up may name the partitions that got messages (a push of this node, or another node's notification,
 * {@code <queue>|<node>|<names>}, each name written as its length, a colon and the name): the consume loop then pops
 * those partitions instead of scanning the group's cursors. A wake-up that names none (a push inside an application's
 * transaction, a redrive, a reconnect, a node of an earlier version, or more names than one notification holds) makes
 * it scan.
 */
public final class Wakeups implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Wakeups.class);

  private final ConcurrentHashMap<String, Signal> signals = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, java.util.Set<Listener>> listeners = new ConcurrentHashMap<>();
  private final DataSource ds;
  private final String channel;
  private final String node;
  private final ThreadFactory threads;
  private volatile boolean running = true;
  private volatile Thread listener;
  private volatile Connection listenConnection;
  /** Queue to the partition names to notify; {@link #UNNAMED} when they are not known or too many to list. */
  private final ConcurrentHashMap<String, java.util.Set<String>> toNotify = new ConcurrentHashMap<>();
  private static final java.util.Set<String> UNNAMED = java.util.Collections.emptySet();
  /** Most characters of partition names one notification lists (a payload holds less than 8,000 bytes). */
  static final int MAX_NAMED_CHARS = 2000;
  private final ReentrantLock notifyLock = new ReentrantLock();
  private final Condition notifyNeeded = notifyLock.newCondition();
  private volatile Thread notifier;
  /** Whether another live node may listen: from the last heartbeat, or a notification another node sent since. */
  private volatile boolean othersAlive = true;
  private volatile long notifications;
  private volatile long ownNotifications;

  /** Creates thread instances; Queen names them. */
  @FunctionalInterface
  public interface ThreadFactory {
    Thread newThread(String role, Runnable r);
  }

  /** Told of a wake-up of its queue, quickly, on the waking thread. */
  @FunctionalInterface
  public interface Listener {
    /** @param partitions the partitions that got messages, or null when not known */
    void woken(java.util.Collection<String> partitions);
  }

  public Wakeups(DataSource ds, String schema, String node, ThreadFactory threads) {
    this.ds = ds;
    this.channel = schema + ".wake";
    this.node = node;
    this.threads = threads;
  }

  /** Starts the LISTEN thread. */
  public void startListener() {
    Thread t = threads.newThread("listener", this::listenLoop);
    listener = t;
    t.start();
  }

  /**
   * Starts the notifier thread, which tells other nodes about committed pushes. Its first notification is this
   * node's hello (an empty queue name): a node that believed itself alone hears it and notifies again at once, without
   * waiting for its next heartbeat to see the new node's row.
   */
  public void startNotifier() {
    Thread t = threads.newThread("notifier", this::notifyLoop);
    notifier = t;
    toNotify.put("", UNNAMED);
    t.start();
  }

  /**
   * What the heartbeat saw: whether another node of this schema is alive. While none is, pushes send no NOTIFY (a node
   * that starts says hello on the channel, and the heartbeat sees its row within one interval).
   */
  public void othersAlive(boolean alive) {
    othersAlive = alive;
  }

  /** Whether this node currently notifies other nodes of its pushes. */
  boolean othersAlive() {
    return othersAlive;
  }

  /**
   * Asks the notifier to {@code NOTIFY} the other nodes of the queues, naming the partitions per queue (a null
   * collection: not known). Returns at once; requests that arrive while a notification is being sent are coalesced
   * into the next one (one per queue). Names of one queue that arrive before the notifier sends are merged, up to
   * {@link #MAX_NAMED_CHARS}; past that, the notification names none.
   */
  public void notifyOthers(java.util.Map<String, ? extends java.util.Collection<String>> partitionsByQueue) {
    if (notifier == null || partitionsByQueue.isEmpty() || !othersAlive) {
      return; // (no other live node: nobody to tell)
    }
    partitionsByQueue.forEach((q, names) -> toNotify.merge(q, names == null ? UNNAMED : new java.util.HashSet<>(names),
        (a, b) -> {
          if (a == UNNAMED || b == UNNAMED) {
            return UNNAMED;
          }
          java.util.Set<String> m = new java.util.HashSet<>(a);
          m.addAll(b);
          return m.size() > MAX_NAMED_CHARS / 2 ? UNNAMED : m; // more than a payload could list anyway
        }));
    notifyLock.lock();
    try {
      notifyNeeded.signal();
    } finally {
      notifyLock.unlock();
    }
  }

  /** NOTIFY statements sent so far (each may cover several queues and several pushes). */
  long notificationsSent() {
    return notifications;
  }

  private void notifyLoop() {
    // a hint need not wait for its WAL flush: without this every notification is a synchronous commit
    // competing with the pushes for the WAL
    // the payload names the sending node after a '|' (queue names cannot hold one), so that its own listener can
    // ignore it: this node's waiters were woken directly when the push committed; then, after another '|' (node ids
    // cannot hold one), the partitions
    String sql = "select set_config('synchronous_commit', 'off', true), pg_notify(?, x) from unnest(?::text[]) as x";
    while (running) {
      notifyLock.lock();
      try {
        while (toNotify.isEmpty() && running) {
          notifyNeeded.await(1, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        if (!running) {
          break;
        }
      } finally {
        notifyLock.unlock();
      }
      if (toNotify.isEmpty()) {
        continue;
      }
      java.util.List<String> batch = new java.util.ArrayList<>();
      for (String q : new java.util.ArrayList<>(toNotify.keySet())) {
        java.util.Set<String> names = toNotify.remove(q);
        if (names != null) {
          batch.add(payload(q, node, names == UNNAMED ? null : names));
        }
      }
      try (Connection c = ds.getConnection(); java.sql.PreparedStatement st = c.prepareStatement(sql)) {
        if (!c.getAutoCommit()) {
          c.setAutoCommit(true);
        }
        st.setString(1, channel);
        st.setArray(2, c.createArrayOf("text", batch.toArray()));
        st.execute();
        notifications++;
      } catch (SQLException | RuntimeException e) {
        // a hint only: waiters on other nodes poll; do not spin on a broken database
        LOG.debug("{} - could not notify other nodes about {} queue(s): {}", node, batch.size(), Sql.describe(e));
        try {
          TimeUnit.MILLISECONDS.sleep(100);
        } catch (InterruptedException ie) {
          if (!running) {
            break;
          }
        }
      }
    }
  }

  /**
   * A notification's payload: {@code <queue>|<node>}, then {@code |} and the partitions when {@code names} lists them
   * and they fit in {@link #MAX_NAMED_CHARS} (each as its length in chars, {@code :}, the name: names may hold any
   * character).
   */
  static String payload(String queue, String node, java.util.Collection<String> names) {
    StringBuilder b = new StringBuilder(queue).append('|').append(node);
    if (names == null || names.isEmpty()) {
      return b.toString();
    }
    int mark = b.length();
    b.append('|');
    for (String n : names) {
      b.append(n.length()).append(':').append(n);
      if (b.length() - mark > MAX_NAMED_CHARS) {
        b.setLength(mark); // too many to list: the receivers scan
        break;
      }
    }
    return b.toString();
  }

  /** The partitions a notification names after {@code from} (its last {@code |}), or null if it names none. */
  static java.util.List<String> names(String payload, int from) {
    if (from < 0 || from >= payload.length()) {
      return null;
    }
    java.util.List<String> out = new java.util.ArrayList<>();
    int i = from;
    try {
      while (i < payload.length()) {
        int colon = payload.indexOf(':', i);
        int len = Integer.parseInt(payload, i, colon, 10);
        out.add(payload.substring(colon + 1, colon + 1 + len));
        i = colon + 1 + len;
      }
    } catch (RuntimeException e) {
      return null; // not a list this version wrote: scan
    }
    return out;
  }

  /**
   * A notification: {@code <queue>|<node>[|<partitions>]} from a node's notifier (ignored when the node is this one:
   * its waiters were woken at the commit), or {@code <queue>} from a push inside an application's transaction.
   */
  void onNotification(String payload) {
    if (payload == null) {
      return;
    }
    int bar = payload.indexOf('|');
    int end = bar < 0 ? -1 : payload.indexOf('|', bar + 1); // node ids hold no '|'
    int nodeEnd = end < 0 ? payload.length() : end;
    if (bar < 0) {
      wake(payload);
    } else if (nodeEnd - bar - 1 != node.length() || !payload.regionMatches(bar + 1, node, 0, node.length())) {
      othersAlive = true; // another node is there (a hello, or a push of its own)
      if (bar > 0) {
        wake(payload.substring(0, bar), end < 0 ? null : names(payload, end + 1));
      }
    } else if (bar > 0) {
      ownNotifications++; // (its own hello is not counted: it names no queue)
    }
  }

  /** Notifications of this node's own pushes that came back on its LISTEN connection and were ignored. */
  long ownNotificationsIgnored() {
    return ownNotifications;
  }

  /** The current version of a queue's signal; pass it to {@link #await} after an empty pop. */
  public long version(String queue) {
    return signal(queue).version;
  }

  /** Waits until the queue is signalled after {@code seen}, or {@code timeout} passes. */
  public void await(String queue, long seen, Duration timeout) throws InterruptedException {
    Signal s = signal(queue);
    long nanos = timeout.toNanos();
    s.lock.lock();
    try {
      while (s.version == seen && nanos > 0 && running) {
        nanos = s.changed.awaitNanos(nanos);
      }
    } finally {
      s.lock.unlock();
    }
  }

  /** Wakes the waiters of a queue, naming no partition. */
  public void wake(String queue) {
    wake(queue, null);
  }

  /** Wakes the waiters of a queue; {@code partitions}: those that got messages, or null when not known. */
  public void wake(String queue, java.util.Collection<String> partitions) {
    Signal s = signals.get(queue);
    if (s != null) {
      s.bump();
    }
    java.util.Set<Listener> ls = listeners.get(queue);
    if (ls != null) {
      ls.forEach(l -> l.woken(partitions));
    }
  }

  /** Wakes every waiter (after a reconnect, or on close). */
  public void wakeAll() {
    signals.values().forEach(Signal::bump);
    listeners.values().forEach(ls -> ls.forEach(l -> l.woken(null)));
  }

  /**
   * Calls {@code onWake} (quickly, on the waking thread) whenever the queue is woken: for a waiter that
   * also waits for other events (the consume loop's claimer waits for pushes and for its workers).
   */
  public void addListener(String queue, Listener onWake) {
    listeners.compute(queue, (q, ls) -> {
      java.util.Set<Listener> set = ls != null ? ls : ConcurrentHashMap.newKeySet();
      set.add(onWake);
      return set;
    });
  }

  public void removeListener(String queue, Listener onWake) {
    listeners.computeIfPresent(queue, (q, ls) -> {
      ls.remove(onWake);
      return ls.isEmpty() ? null : ls; // an empty set per queue ever consumed would stay for the node's life
    });
  }

  /**
   * Forgets a deleted queue's signal, after waking its waiters (they pop, find nothing and wait on a new signal: a
   * spurious wake-up, nothing missed). Listeners stay: they belong to running subscriptions and go with them.
   */
  public void forget(String queue) {
    Signal s = signals.remove(queue);
    if (s != null) {
      s.bump();
    }
  }

  /** The queues with a signal here. */
  public java.util.Set<String> signalQueues() {
    return java.util.Set.copyOf(signals.keySet());
  }

  /** How many queues have a signal here. */
  public int signalsHeld() {
    return signals.size();
  }

  /** How many queues have listeners here. */
  public int listenerSetsHeld() {
    return listeners.size();
  }

  /** Whether the wake-up listener holds its LISTEN connection now. */
  public boolean connected() {
    return listenConnection != null;
  }

  /**
   * The {@code application_name} of the listener's connection while it listens: {@code queen-<node>-listener} (node ids
   * are ASCII; PostgreSQL shows the first 63 characters).
   */
  static String applicationName(String node) {
    return "queen-" + node + "-listener";
  }

  private Signal signal(String queue) {
    return signals.computeIfAbsent(queue, q -> new Signal());
  }

  /** Runs before the listener's connection goes back to the pool (resources close in reverse order). */
  private interface GivenBack extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * The listener's connection goes back to the application's pool as it came, however the loop ended: not listening
   * (its notifications would pile up in the driver of whoever borrows it next), with the role's idle_session_timeout
   * and {@code applicationName}, the application_name it had when borrowed (null: not changed). Not the setting's reset
   * value: a driver may set the name after the connection started (pgjdbc's defaults do), and that is then the server's.
   */
  private static void giveBack(Connection c, String applicationName) {
    try (Statement st = c.createStatement()) {
      st.execute("UNLISTEN *");
      st.execute("select set_config(name, reset_val, false) from pg_settings where name = 'idle_session_timeout'");
    } catch (SQLException | RuntimeException ignored) {
      return; // broken: the pool discards it
    }
    if (applicationName != null) {
      try (java.sql.PreparedStatement st = c.prepareStatement("select set_config('application_name', ?, false)")) {
        st.setString(1, applicationName);
        st.execute();
      } catch (SQLException | RuntimeException ignored) {
        // broken: the pool discards it
      }
    }
  }

  private void listenLoop() {
    long backoff = 100;
    long lostSince = 0; // System.nanoTime() when the connection was lost, 0 while listening
    long reconnects = 0;
    while (running) {
      String[] borrowedAs = {null}; // the connection's application_name in the pool, put back when it goes back
      try (Connection c = ds.getConnection(); GivenBack ignored = () -> giveBack(c, borrowedAs[0])) {
        c.setAutoCommit(true);
        try (Statement st = c.createStatement();
            java.sql.ResultSet rs = st.executeQuery("select current_setting('application_name')")) {
          rs.next();
          borrowedAs[0] = rs.getString(1);
        }
        try (java.sql.PreparedStatement st = c.prepareStatement("select set_config('application_name', ?, false)")) {
          st.setString(1, applicationName(node)); // what pg_stat_activity shows for this connection
          st.execute();
        }
        try (Statement st = c.createStatement()) {
          // the connection sits idle between notifications: a role's idle_session_timeout would end it every time
          st.execute("select set_config(name, '0', false) from pg_settings where name = 'idle_session_timeout'");
          st.execute("LISTEN " + Sql.quoteIdent(channel));
        }
        listenConnection = c;
        PGConnection pg = c.unwrap(PGConnection.class);
        wakeAll(); // anything pushed while we were not listening
        backoff = 100;
        if (lostSince != 0) {
          LOG.info("{} - wake-up listener is back after {} ms ({} reconnect attempt(s) so far)", node,
              TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lostSince), reconnects);
          lostSince = 0;
        }
        LOG.debug("{} - listening on {}", node, channel);
        while (running) {
          PGNotification[] ns = pg.getNotifications(500);
          if (ns != null) {
            for (PGNotification n : ns) {
              onNotification(n.getParameter());
            }
          }
        }
      } catch (SQLException | RuntimeException e) {
        listenConnection = null;
        if (!running) {
          break;
        }
        reconnects++;
        if (lostSince == 0) {
          lostSince = System.nanoTime();
          LOG.warn("{} - wake-up listener lost its connection ({}); waiters poll every pollInterval until it is back",
              node, Sql.describe(e));
        } else {
          LOG.debug("{} - wake-up listener still cannot connect ({}); next try in {} ms", node, Sql.describe(e), backoff);
        }
        try {
          TimeUnit.MILLISECONDS.sleep(backoff);
        } catch (InterruptedException ie) {
          if (!running) {
            break;
          }
          Thread.currentThread().interrupt();
          break;
        }
        backoff = Math.min(2000, backoff * 2); // capped: it must be back soon after the database is
      }
    }
    listenConnection = null;
  }

  @Override
  public void close() {
    running = false;
    wakeAll();
    Thread n = notifier;
    if (n != null) {
      notifyLock.lock();
      try {
        notifyNeeded.signalAll();
      } finally {
        notifyLock.unlock();
      }
      try {
        n.join(2000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    Thread t = listener;
    if (t != null) {
      try {
        t.join(2000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (t.isAlive()) {
        t.interrupt();
      }
    }
  }

  private static final class Signal {
    final ReentrantLock lock = new ReentrantLock();
    final Condition changed = lock.newCondition();
    volatile long version;

    void bump() {
      lock.lock();
      try {
        version++;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }
}
