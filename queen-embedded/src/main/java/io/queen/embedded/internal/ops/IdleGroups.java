package io.queen.embedded.internal.ops;

import io.queen.Queen;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.GroupActivity;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumer groups that nobody uses any more. {@link #record} writes the groups this node used since its last call
 * ({@link GroupActivity}) into {@code consumer_groups.last_active_at}, at most once a minute per group; {@link #expire}
 * removes the named groups idle longer than {@code groupIdleExpiry} (not the queue's default group), each with an INFO
 * line and the counter {@code queen.groups.expired}: retention no longer waits for them.
 */
public final class IdleGroups {
  private static final Logger LOG = LoggerFactory.getLogger(IdleGroups.class);
  /** A group's activity is written again only when the stored one is older than this. */
  static final long WRITE_EVERY_MS = 60_000;

  private final String node;
  private final DataSource ds;
  private final Broker broker;
  private final long expiryMillis;
  private final String recordSql;
  private final String idleSql;

  public IdleGroups(String node, DataSource ds, String quotedSchema, Broker broker, Duration expiry) {
    this.node = node;
    this.ds = ds;
    this.broker = broker;
    this.expiryMillis = expiry.toMillis();
    String s = quotedSchema;
    this.recordSql = "update " + s + ".consumer_groups g set last_active_at = now()"
        + " from unnest(?::text[], ?::text[]) x(queue, grp) join " + s + ".queues q on q.name = x.queue"
        + " where g.queue_id = q.id and g.name = x.grp"
        + " and g.last_active_at < now() - " + WRITE_EVERY_MS + " * interval '1 millisecond'";
    this.idleSql = "select q.name, g.name, extract(epoch from now() - g.last_active_at)::bigint from " + s
        + ".consumer_groups g join " + s + ".queues q on q.id = g.queue_id"
        + " where g.name <> ? and g.last_active_at < now() - ? * interval '1 millisecond' order by 1, 2 limit 1000";
  }

  /** Writes the activity this node recorded; what cannot be written now is kept for the next call. */
  public void record() {
    List<GroupActivity.Group> used = broker.activity().drain();
    if (used.isEmpty()) {
      return;
    }
    String[] queues = new String[used.size()];
    String[] groups = new String[used.size()];
    for (int i = 0; i < used.size(); i++) {
      queues[i] = used.get(i).queue();
      groups[i] = used.get(i).group();
    }
    try {
      Sql.inTransaction(ds, "record group activity", c -> {
        try (PreparedStatement st = c.prepareStatement(recordSql)) {
          st.setArray(1, c.createArrayOf("text", queues));
          st.setArray(2, c.createArrayOf("text", groups));
          return st.executeUpdate();
        }
      });
    } catch (RuntimeException e) {
      used.forEach(g -> broker.activity().touch(g.queue(), g.group()));
      throw e;
    }
  }

  /** Removes the named groups idle past the expiry; returns how many. Nothing when the expiry is zero (never). */
  public int expire() {
    if (expiryMillis <= 0) {
      return 0;
    }
    record(); // this node's own recent use first
    List<String[]> idle = Sql.inTransaction(ds, "find idle groups", c -> {
      List<String[]> out = new ArrayList<>();
      try (PreparedStatement st = c.prepareStatement(idleSql)) {
        st.setString(1, Queen.DEFAULT_GROUP);
        st.setLong(2, expiryMillis);
        try (ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            out.add(new String[] {rs.getString(1), rs.getString(2), rs.getString(3)});
          }
        }
      }
      return out;
    });
    int removed = 0;
    for (String[] g : idle) {
      if (broker.catalogue().expireGroup(g[0], g[1], expiryMillis)) {
        removed++;
        broker.metrics().groupExpired(g[0]);
        LOG.info("{} - removed group '{}' of queue '{}': no pop, ack or seek for {} (groupIdleExpiry {}); retention"
            + " no longer waits for it, and a pop with its name creates it anew", node, g[1], g[0],
            Duration.ofSeconds(Long.parseLong(g[2])), Duration.ofMillis(expiryMillis));
      }
    }
    return removed;
  }
}
