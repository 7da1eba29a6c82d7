package io.queen.embedded.internal.ops;

import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.QueueCatalogue;
import io.queen.embedded.internal.log.Metrics;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Every {@link #PERIOD_MS} on every node: reads each group's lag and pending age ({@link StatusReader#lag}, which
 * reads only the cursors that have work) and the queues' retention state, sets the gauges, and watches the lag
 * alarm: a group whose oldest pending message is older than its queue's {@code pendingAlertAfter} is logged once
 * at WARN when it crosses the threshold and once at INFO when it is back under it (per node). It also counts, per
 * queue, the messages waiting for a key this node does not hold (a gauge, and a WARN when a queue starts to have
 * some). The gauges of a group or
 * queue deleted since the previous pass are removed, with the group's counters and pop position. A queue this node
 * keeps something of (meters, an options view, a pop position, a wake-up signal) and that no longer exists is
 * forgotten once two passes in a row found it missing (one would forget a queue this node's push is creating at that
 * moment): another node deleted it, and without this every node but the deleting one kept its meters for good. Runs
 * on the node's janitor thread; {@link #run()} never throws.
 */
public final class GroupWatch implements Runnable {
  private static final Logger LOG = LoggerFactory.getLogger(GroupWatch.class);
  /** How often the gauges are refreshed and the alarm is checked. */
  public static final long PERIOD_MS = 10_000;

  private final String node;
  private final DataSource ds;
  private final StatusReader reader;
  private final Metrics metrics;
  private final String stateSql;
  private final Set<String> alarmed = ConcurrentHashMap.newKeySet();
  /** The groups ({@code queue NUL group}) and the queues with retention state the previous pass saw. */
  private Set<String> groupsSeen = Set.of();
  private Set<String> retentionSeen = Set.of();
  /** Queues this node holds something of that the previous pass found missing. */
  private Set<String> missingBefore = Set.of();
  /** The queues that had messages waiting for a key at the previous pass. */
  private Set<String> waitingSeen = Set.of();
  private final QueueCatalogue catalogue;
  private final String queuesSql;
  private boolean failing;

  public GroupWatch(String node, DataSource ds, String quotedSchema, StatusReader reader, Metrics metrics,
      QueueCatalogue catalogue) {
    this.node = node;
    this.catalogue = catalogue;
    this.queuesSql = "select coalesce(array_agg(name), '{}') from " + quotedSchema + ".queues";
    this.ds = ds;
    this.reader = reader;
    this.metrics = metrics;
    String s = quotedSchema;
    this.stateSql = "select q.name, coalesce(extract(epoch from now() - r.oldest_at), 0)::float8, r.held_by"
        + " from " + s + ".retention_state r join " + s + ".queues q on q.id = r.queue_id"
        + " where q.retention_ms > 0 or q.completed_retention_ms > 0";
  }

  @Override
  public void run() {
    try {
      List<StatusReader.GroupLag> lags = reader.lag();
      Set<String> seen = new HashSet<>();
      for (StatusReader.GroupLag g : lags) {
        String key = g.queue() + '\u0000' + g.group();
        seen.add(key);
        boolean alert = g.alert();
        metrics.groupLag(g.queue(), g.group(), g.lag(), g.pendingAge().toMillis() / 1000.0, alert);
        if (alert && alarmed.add(key)) {
          LOG.warn("{} - group '{}' of queue '{}' has had a message pending for {} s, past pendingAlertAfter ({} s);"
              + " lag {} message(s)", node, g.group(), g.queue(), g.pendingAge().toSeconds(),
              g.alertAfter().toSeconds(), g.lag());
        } else if (!alert && alarmed.remove(key)) {
          LOG.info("{} - group '{}' of queue '{}' is back under pendingAlertAfter ({} s): oldest pending {} s",
              node, g.group(), g.queue(), g.alertAfter().toSeconds(), g.pendingAge().toSeconds());
        }
      }
      alarmed.retainAll(seen);
      // a group or queue deleted since the previous pass: its gauges go, or they would show their last values (an
      // alert raised for ever)
      for (String key : groupsSeen) {
        if (!seen.contains(key)) {
          int cut = key.indexOf('\u0000');
          catalogue.forgetGroup(key.substring(0, cut), key.substring(cut + 1)); // its gauges, counters, pop position
        }
      }
      groupsSeen = seen;
      watchWaitingForKey();
      Set<String> queues = new HashSet<>();
      Sql.autoCommit(ds, "retention state", c -> {
        try (PreparedStatement st = c.prepareStatement(stateSql); ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            String queue = rs.getString(1);
            String heldBy = rs.getString(3);
            queues.add(queue);
            // a group deleted since the last retention pass still names itself there: it holds nothing back now
            metrics.retentionState(queue, rs.getDouble(2), heldBy != null && seen.contains(queue + '\u0000' + heldBy)
                ? heldBy : null);
          }
        }
        return null;
      });
      for (String q : retentionSeen) {
        if (!queues.contains(q)) {
          metrics.retentionGone(q);
        }
      }
      retentionSeen = queues;
      forgetQueuesDeletedElsewhere();
      if (failing) {
        failing = false;
        LOG.info("{} - group gauges are read again", node);
      }
    } catch (RuntimeException e) {
      if (!failing) {
        failing = true;
        LOG.warn("{} - could not read the group gauges ({}); trying again every {} ms", node,
            Sql.describe(e), PERIOD_MS);
      }
    }
  }

  /**
   * Sets the gauge of messages waiting for a key this node does not hold, per queue (0 for a queue where they waited
   * at the previous pass and wait no more), and logs once at WARN when a queue starts to have such messages and once
   * at INFO when it has none again.
   */
  private void watchWaitingForKey() {
    java.util.Map<String, java.util.Map<String, Long>> waiting = reader.waitingForKey();
    for (java.util.Map.Entry<String, java.util.Map<String, Long>> e : waiting.entrySet()) {
      long n = e.getValue().values().stream().mapToLong(Long::longValue).sum();
      metrics.waitingForKey(e.getKey(), n);
      if (!waitingSeen.contains(e.getKey())) {
        LOG.warn("{} - queue '{}' has {} message(s) waiting for key id(s) {}, which this node does not hold: a pop"
            + " leases none of their partitions, and they wait for a node that holds the key (or for this node with"
            + " it in oldEncryptionKeys(...))", node, e.getKey(), n, new java.util.TreeSet<>(e.getValue().keySet()));
      }
    }
    for (String q : waitingSeen) {
      if (!waiting.containsKey(q)) {
        metrics.waitingForKey(q, 0);
        LOG.info("{} - queue '{}' has no message waiting for a key any more", node, q);
      }
    }
    waitingSeen = Set.copyOf(waiting.keySet());
  }

  /** Forgets the queues this node holds something of that two passes in a row found missing. */
  private void forgetQueuesDeletedElsewhere() {
    Set<String> held = catalogue.queuesHeld(); // before the read: a queue made after it is held, and seen, next pass
    if (held.isEmpty() && missingBefore.isEmpty()) {
      return;
    }
    Set<String> exist = Sql.autoCommit(ds, "queue names", c -> {
      try (PreparedStatement st = c.prepareStatement(queuesSql); ResultSet rs = st.executeQuery()) {
        rs.next();
        return Set.of((String[]) rs.getArray(1).getArray());
      }
    });
    Set<String> missing = new HashSet<>();
    for (String q : held) {
      if (exist.contains(q)) {
        continue;
      }
      if (missingBefore.contains(q)) {
        catalogue.forgetDeletedElsewhere(q);
        LOG.debug("{} - forgot queue '{}': it no longer exists (deleted by another node)", node, q);
      } else {
        missing.add(q);
      }
    }
    missingBefore = missing;
  }

  /** Whether the alarm of this group is raised on this node. */
  boolean alarmed(String queue, String group) {
    return alarmed.contains(queue + '\u0000' + group);
  }
}
