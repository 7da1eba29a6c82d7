package io.queen.embedded.internal;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.DeadLetter;
import io.queen.DeadLetters;
import io.queen.Names;
import io.queen.PayloadSerializationException;
import io.queen.Queen;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.JsonCodec;
import io.queen.embedded.internal.log.PayloadCipher;
import io.queen.embedded.internal.log.Wakeups;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;

/** The dead-letter queue of one queue, over the node's log, its wake-ups and its open check. */
public final class DeadLettersImpl implements DeadLetters {
  private final Broker broker;
  private final Wakeups wakeups;
  /** Throws {@code BrokerClosedException} once the node is closed. */
  private final Runnable checkOpen;
  private final String queue;

  DeadLettersImpl(Broker broker, Wakeups wakeups, Runnable checkOpen, String queue) {
    this.broker = broker;
    this.wakeups = wakeups;
    this.checkOpen = checkOpen;
    this.queue = Names.queue(queue);
  }

  @Override
  public Query group(String group) {
    return new QueryImpl(Names.group(group));
  }

  @Override
  public Query defaultGroup() {
    return new QueryImpl(Queen.DEFAULT_GROUP);
  }

  private final class QueryImpl implements Query {
    private final String group;
    private final String s = broker.schema();

    QueryImpl(String group) {
      this.group = group;
    }

    @Override
    public List<DeadLetter> list(int limit, Long afterId) {
      checkOpen.run();
      if (limit < 1 || limit > 1000) {
        throw new IllegalArgumentException("limit must be 1..1000, was " + limit);
      }
      return Sql.autoCommit(broker.dataSource(), "dead letters list", c -> {
        try (PreparedStatement st = c.prepareStatement("select d.id, p.name, d.partition_id, d.\"offset\", d.message_id,"
            + " m.payload::text, d.error, d.attempts, d.failed_at, m.key_id from " + s + ".dead_letters d"
            + " join " + s + ".queues q on q.id = d.queue_id"
            // per entry: its partition and its message, in lateral subqueries the planner cannot flatten and turn
            // into a scan of every message per entry when the statistics say the log is empty (StaleStatisticsTest)
            + " cross join lateral (select p0.name from " + s + ".partitions p0 where p0.id = d.partition_id offset 0) p"
            + " left join lateral (select m0.payload, m0.key_id from " + s + ".messages m0"
            + "   where m0.partition_id = d.partition_id and m0.\"offset\" = d.\"offset\" offset 0) m on true"
            + " where q.name = ? and d.group_name = ? and d.id > ? order by d.id limit ?")) {
          st.setString(1, queue);
          st.setString(2, group);
          st.setLong(3, afterId == null ? 0 : afterId);
          st.setInt(4, limit);
          List<DeadLetter> out = new ArrayList<>();
          try (ResultSet rs = st.executeQuery()) {
            while (rs.next()) {
              // one entry whose payload cannot be decoded reports why; the rest of the page lists
              String text = rs.getString(6);
              JsonNode payload = null;
              String payloadError = null;
              // a sealed payload (encrypted queue) is opened with the node's keys; without the key the entry says so
              String keyId = rs.getString(10);
              String json = text;
              try {
                if (text != null && keyId != null) {
                  PayloadCipher cipher = broker.cipher();
                  json = cipher.canOpen(keyId) ? cipher.open(text, keyId, rs.getObject(5, UUID.class)) : null;
                  if (json == null) {
                    payloadError = broker.encryption().missingKey(queue, keyId);
                  }
                }
                if (json != null) {
                  payload = broker.codec().parse(json);
                }
              } catch (PayloadSerializationException | IllegalArgumentException e) {
                payloadError = e.getMessage();
              }
              out.add(new DeadLetter(rs.getLong(1), queue, rs.getString(2), rs.getLong(3), rs.getLong(4), group,
                  rs.getObject(5, UUID.class), payload, payloadError, text == null ? 0 : JsonCodec.utf8Length(text),
                  rs.getString(7), rs.getInt(8), rs.getTimestamp(9).toInstant()));
            }
          }
          return out;
        }
      });
    }

    @Override
    public long count() {
      checkOpen.run();
      return Sql.autoCommit(broker.dataSource(), "dead letters count", c -> {
        try (PreparedStatement st = c.prepareStatement("select count(*) from " + s + ".dead_letters d join " + s
            + ".queues q on q.id = d.queue_id where q.name = ? and d.group_name = ?")) {
          st.setString(1, queue);
          st.setString(2, group);
          try (ResultSet rs = st.executeQuery()) {
            rs.next();
            return rs.getLong(1);
          }
        }
      });
    }

    @Override
    public boolean redrive(DeadLetter d) {
      checkOpen.run();
      Objects.requireNonNull(d, "deadLetter must not be null");
      if (!d.queue().equals(queue) || !d.group().equals(group)) {
        throw new IllegalArgumentException("dead letter " + d.id() + " belongs to queue '" + d.queue() + "' group '"
            + d.group() + "', not '" + queue + "'/'" + group + "'");
      }
      int n = Sql.inTransaction(broker.dataSource(), "dead letters redrive", c -> redrive(c, "d.id = ?", d.id()));
      wakeups.wake(queue);
      return n > 0;
    }

    @Override
    public int redriveAll() {
      checkOpen.run();
      int n = Sql.inTransaction(broker.dataSource(), "dead letters redrive", c -> redrive(c, "true", null));
      if (n == 0) {
        broker.catalogue().requireGroup(queue, group, "redriveAll"); // a misspelt name is not an empty dead-letter queue
      }
      wakeups.wake(queue);
      return n;
    }

    private int redrive(Connection c, String filter, Long id) throws SQLException {
      List<Long> pids = new ArrayList<>();
      List<Long> offsets = new ArrayList<>();
      try (PreparedStatement st = c.prepareStatement("delete from " + s + ".dead_letters d using " + s + ".queues q"
          + " where q.id = d.queue_id and q.name = ? and d.group_name = ? and " + filter
          + " returning d.partition_id, d.\"offset\"")) {
        st.setString(1, queue);
        st.setString(2, group);
        if (id != null) {
          st.setLong(3, id);
        }
        try (ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            pids.add(rs.getLong(1));
            offsets.add(rs.getLong(2));
          }
        }
      }
      if (pids.isEmpty()) {
        return 0;
      }
      // the group's cursor rows of these partitions first, in key order (the order an ack takes them in, and the ack
      // then touches redeliveries too): an ack or pop clearing a flag at this moment holds its row, so the redrive
      // waits for it and sets the flag after it; one that comes later sees the redelivery (the ack's settling
      // statement looks again after waiting). Rows whose flag looks set are locked too: skipping them would let such
      // a drain clear the flag over the redelivery.
      try (PreparedStatement st = c.prepareStatement("select 1 from " + s + ".cursors where partition_id = any(?::bigint[])"
          + " and group_name = ? order by partition_id, group_name for update")) {
        st.setArray(1, c.createArrayOf("bigint", pids.toArray()));
        st.setString(2, group);
        st.executeQuery().close();
      }
      try (PreparedStatement st = c.prepareStatement("insert into " + s + ".redeliveries(partition_id, group_name,"
          + " \"offset\") select x.pid, ?, x.o from unnest(?::bigint[], ?::bigint[]) as x(pid, o) on conflict do nothing")) {
        st.setString(1, group);
        st.setArray(2, c.createArrayOf("bigint", pids.toArray()));
        st.setArray(3, c.createArrayOf("bigint", offsets.toArray()));
        st.executeUpdate();
      }
      // setting the flag (never clearing it) needs no partition lock; the rows are this transaction's already
      try (PreparedStatement st = c.prepareStatement("update " + s + ".cursors set has_pending = true"
          + " where partition_id = any(?::bigint[]) and group_name = ? and not has_pending")) {
        st.setArray(1, c.createArrayOf("bigint", pids.toArray()));
        st.setString(2, group);
        st.executeUpdate();
      }
      return pids.size();
    }

    @Override
    public int purge() {
      checkOpen.run();
      int n = Sql.autoCommit(broker.dataSource(), "dead letters purge", c -> {
        try (PreparedStatement st = c.prepareStatement("delete from " + s + ".dead_letters d using " + s + ".queues q"
            + " where q.id = d.queue_id and q.name = ? and d.group_name = ?")) {
          st.setString(1, queue);
          st.setString(2, group);
          return st.executeUpdate();
        }
      });
      if (n == 0) {
        broker.catalogue().requireGroup(queue, group, "purge"); // a misspelt name is not an empty dead-letter queue
      }
      return n;
    }

    @Override
    public boolean delete(DeadLetter d) {
      checkOpen.run();
      Objects.requireNonNull(d, "deadLetter must not be null");
      if (!d.queue().equals(queue) || !d.group().equals(group)) {
        throw new IllegalArgumentException("dead letter " + d.id() + " belongs to queue '" + d.queue() + "' group '"
            + d.group() + "', not '" + queue + "'/'" + group + "'");
      }
      return Sql.autoCommit(broker.dataSource(), "dead letter delete", c -> {
        try (PreparedStatement st = c.prepareStatement("delete from " + s + ".dead_letters d using " + s + ".queues q"
            + " where q.id = d.queue_id and q.name = ? and d.group_name = ? and d.id = ?")) {
          st.setString(1, queue);
          st.setString(2, group);
          st.setLong(3, d.id());
          return st.executeUpdate();
        }
      }) > 0;
    }
  }
}
