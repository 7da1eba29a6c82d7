package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.ConnectorStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the source tests share: SQL on the test database, an {@code items} table whose trigger audits every row
 * change in commit order, a writer that keeps changing it, and a reader that drains a queue per partition.
 */
final class SourceFixture {
  final TestDatabase db;

  SourceFixture(TestDatabase db) {
    this.db = db;
  }

  void sql(String... statements) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  long count(String query) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  String text(String query) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      return rs.next() ? rs.getString(1) : null;
    }
  }

  /**
   * Drops a replication slot by hand, as an operator would: terminates the walsender holding it and drops it, again
   * until the owner has not taken it back in between (up to 20 s).
   */
  void dropSlotByHand(String slot) {
    await().atMost(java.time.Duration.ofSeconds(20)).pollInterval(java.time.Duration.ofMillis(20)).until(() -> {
      sql("select pg_terminate_backend(active_pid) from pg_replication_slots where slot_name = '" + slot + "'"
          + " and active_pid is not null");
      try {
        sql("select pg_drop_replication_slot('" + slot + "')");
        return true;
      } catch (SQLException e) {
        return false; // still active: try again
      }
    });
  }

  List<String> rows(String query) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      int n = rs.getMetaData().getColumnCount();
      while (rs.next()) {
        List<String> r = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
          r.add(rs.getString(i));
        }
        out.add(String.join(" | ", r));
      }
    }
    return out;
  }

  static ConnectorStatus status(Queen queen, String name) {
    return queen.connectors().status(name).orElseThrow();
  }

  static void awaitPhase(Queen queen, String name, String phase, Duration within) {
    await().atMost(within).pollInterval(Duration.ofMillis(50)).until(() -> status(queen, name).phase().equals(phase));
  }

  static String sourceDoc(String table, String queue, String extra) {
    return "{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"" + table + "\", \"queue\": \"" + queue
        + "\"}], \"snapshot\": \"never\"" + (extra.isEmpty() ? "" : ", " + extra) + "}}";
  }

  /** {@code name} (id, ver, note) and {@code name_audit}: every row change, a key change as d + c. */
  void createAudited(String name) throws SQLException {
    sql("create table " + name + " (id bigint primary key, ver int not null, note text)",
        "create table " + name + "_audit (seq bigserial primary key, id bigint not null, op text not null, ver int)",
        "create function " + name + "_audit() returns trigger language plpgsql as $$ begin"
            + " if tg_op = 'DELETE' then insert into " + name + "_audit (id, op, ver) values (old.id, 'd', old.ver);"
            + " return old; end if;"
            + " insert into " + name + "_audit (id, op, ver) values (new.id, case tg_op when 'INSERT' then 'c' else 'u'"
            + " end, new.ver); return new; end $$",
        "create trigger " + name + "_audit after insert or update or delete on " + name
            + " for each row execute function " + name + "_audit()");
  }

  /** The audit per key, in commit order: {@code c:1}, {@code u:2}, {@code d}. */
  Map<Long, List<String>> audit(String name) throws SQLException {
    Map<Long, List<String>> out = new TreeMap<>();
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select id, op, ver from " + name + "_audit order by seq")) {
      while (rs.next()) {
        String op = rs.getString(2);
        out.computeIfAbsent(rs.getLong(1), k -> new ArrayList<>()).add(op.equals("d") ? "d" : op + ":" + rs.getInt(3));
      }
    }
    return out;
  }

  /** One writer on {@code table}: transactions of 1..3 inserts, updates and deletes, until closed. */
  final class Writer implements AutoCloseable {
    final AtomicBoolean stop = new AtomicBoolean();
    final AtomicLong transactions = new AtomicLong();
    final Thread thread;
    volatile Throwable failure;

    Writer(String table, long seed) {
      Random rnd = new Random(seed);
      List<Long> live = new ArrayList<>();
      thread = new Thread(() -> {
        long next = 1;
        try (Connection c = db.connection()) {
          c.setAutoCommit(false);
          try (PreparedStatement ins = c.prepareStatement("insert into " + table + " (id, ver, note) values (?, 1, ?)");
              PreparedStatement upd = c.prepareStatement("update " + table + " set ver = ver + 1 where id = ?");
              PreparedStatement del = c.prepareStatement("delete from " + table + " where id = ?")) {
            while (!stop.get()) {
              int n = 1 + rnd.nextInt(3);
              for (int i = 0; i < n; i++) {
                int what = rnd.nextInt(10);
                if (live.size() < 20 || what < 3) {
                  ins.setLong(1, next);
                  ins.setString(2, "note " + next);
                  ins.executeUpdate();
                  live.add(next++);
                } else if (what < 8) {
                  upd.setLong(1, live.get(rnd.nextInt(live.size())));
                  upd.executeUpdate();
                } else {
                  del.setLong(1, live.remove(rnd.nextInt(live.size())));
                  del.executeUpdate();
                }
              }
              c.commit();
              transactions.incrementAndGet();
              Thread.sleep(2 + rnd.nextInt(8));
            }
          }
        } catch (Throwable t) {
          failure = t;
        }
      }, "writer-" + table);
      thread.setDaemon(true);
      thread.start();
    }

    @Override
    public void close() throws InterruptedException {
      stop.set(true);
      thread.join(10_000);
      assertThat(failure).as("the writer failed").isNull();
    }
  }

  /** Reads a queue from its beginning with a group of its own, per partition in offset order. */
  static final class Reader {
    final String group;
    final Map<String, List<Message>> byPartition = new TreeMap<>();
    final Map<String, java.util.UUID> ids = new HashMap<>();
    int total;
    int duplicateIds;

    Reader(String group) {
      this.group = group;
    }

    Reader drain(Queen queen, String queue) {
      while (true) {
        List<Message> got = queen.queue(queue).group(group).subscription(SubscriptionMode.ALL).autoAck(true)
            .batch(1000).partitions(1000).pop();
        if (got.isEmpty()) {
          return this;
        }
        for (Message m : got) {
          byPartition.computeIfAbsent(m.partition(), k -> new ArrayList<>()).add(m);
          total++;
          if (ids.put(m.transactionId(), m.id()) != null) {
            duplicateIds++;
          }
        }
      }
    }

    List<Message> all() {
      List<Message> out = new ArrayList<>();
      byPartition.values().forEach(out::addAll);
      return out;
    }

    /** Per key (the partition), the events as the audit writes them. */
    Map<Long, List<String>> described() {
      Map<Long, List<String>> got = new TreeMap<>();
      byPartition.forEach((p, msgs) -> {
        List<String> l = new ArrayList<>();
        for (Message m : msgs) {
          JsonNode e = m.payload();
          String op = e.get("op").asText();
          l.add(op.equals("d") ? "d" : op + ":" + e.get("after").get("ver").asInt());
        }
        got.put(Long.parseLong(p), l);
      });
      return got;
    }
  }
}
