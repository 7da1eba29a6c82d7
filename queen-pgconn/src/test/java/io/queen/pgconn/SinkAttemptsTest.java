package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.DeadLetter;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A sink's data-error attempts are durable and shared by all nodes: each refusal is a FAILED ack of the
 * partition's head (the cursor's {@code attempts}), so a poison message tried twice on one node is tried
 * a third time, and dead-lettered, by the node that takes over; the queue's {@code retryDelay} holds back only
 * the poison's partition.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SinkAttemptsTest {
  private static final Duration RETRY_DELAY = Duration.ofSeconds(4);
  /** The database's error as the sink keeps it: no values, the names of the constraint and the table. */
  private static final String REFUSED = "SQLException (sanitised org.postgresql.util.PSQLException, SQLState 23514):"
      + " new row for relation \"…\" violates check constraint \"…\"; constraint qty_positive; table items";

  private static Queen node(TestDatabase db, String id) {
    return EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId(id)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start();
  }

  private static void sql(TestDatabase db, String s) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute(s);
    }
  }

  private static List<String> rows(TestDatabase db, String q) throws Exception {
    List<String> out = new ArrayList<>();
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(q)) {
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

  /** The sink group's cursor on one partition: {attempts, last_error, committed_offset}. */
  private static String[] cursor(TestDatabase db, String partition) throws Exception {
    try (Connection c = db.connection(); PreparedStatement st = c.prepareStatement("select cu.attempts, cu.last_error,"
        + " cu.committed_offset from queen.cursors cu join queen.partitions p on p.id = cu.partition_id"
        + " where cu.group_name = 'pg-items' and p.name = ?")) {
      st.setString(1, partition);
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() ? new String[] {rs.getString(1), rs.getString(2), rs.getString(3)} : new String[] {"0", null, "-1"};
      }
    }
  }

  @Test
  void aPoisonTriedTwiceOnNodeAIsTriedOnceMoreOnNodeBAndDeadLetteredAfterMaxAttemptsInAll(TestDatabase db)
      throws Exception {
    sql(db, "CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL CONSTRAINT qty_positive CHECK (qty > 0))");
    Queen a = node(db, "attempts-a");
    try {
      // retryLimit 1 < maxAttempts - 1: the queue's limit does not cut the sink's attempts short
      a.queue("items").configure(b -> b.retryLimit(1).retryDelay(RETRY_DELAY));
      a.connectors().put("items", """
          {"kind": "sink", "sink": {"queue": "items", "table": "items", "mode": "upsert", "maxAttempts": 3}}""");
      a.push(List.of(PushItem.to("items", "p", Map.of("id", 1, "qty", 1)),
          PushItem.to("items", "p", Map.of("id", 2, "qty", -5)),
          PushItem.to("items", "p", Map.of("id", 3, "qty", 3))));
      await().atMost(30, TimeUnit.SECONDS).until(() -> "1".equals(cursor(db, "p")[0]));
      String[] first = cursor(db, "p");
      assertThat(first[1]).isEqualTo("sink 'items' attempt 1 of 3 refused: " + REFUSED);
      assertThat(first[2]).as("the message before the poison applied and acknowledged").isEqualTo("0");
      assertThat(rows(db, "select id, qty from items order by id")).containsExactly("1 | 1");

      // the poison's partition waits its retryDelay; another partition's messages do not wait for it
      a.push(List.of(PushItem.to("items", "q", Map.of("id", 10, "qty", 10)),
          PushItem.to("items", "q", Map.of("id", 11, "qty", 11))));
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id from items where id >= 10 order by id")).containsExactly("10", "11"));
      assertThat(cursor(db, "p")[0]).as("applied while the poison waited in its backoff").isEqualTo("1");

      await().atMost(30, TimeUnit.SECONDS).until(() -> "2".equals(cursor(db, "p")[0]));
      assertThat(cursor(db, "p")[1]).startsWith("sink 'items' attempt 2 of 3 refused: ");
      assertThat(a.connectors().status("items").orElseThrow().counters()).containsEntry("dlq", 0L);
    } finally {
      a.close(); // within the retry delay: node A does not try a third time
    }
    assertThat(cursor(db, "p")[0]).as("the count outlives the node").isEqualTo("2");
    assertThat(rows(db, "select id, qty from items order by id")).containsExactly("1 | 1", "10 | 10", "11 | 11");

    try (Queen b = node(db, "attempts-b")) {
      assertThat(b.deadLetters("items").group("pg-items").list(10, null)).isEmpty();
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(b.deadLetters("items").group("pg-items").list(10, null)).hasSize(1));
      DeadLetter d = b.deadLetters("items").group("pg-items").list(10, null).get(0);
      assertThat(d.partition()).isEqualTo("p");
      assertThat(d.offset()).isEqualTo(1);
      assertThat(d.attempts()).as("exactly maxAttempts in all, over two nodes").isEqualTo(3);
      assertThat(d.error()).isEqualTo("sink 'items' gave up after 3 attempt(s): " + REFUSED);
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() -> assertThat(rows(db, "select id, qty from items order by id"))
          .as("its partition carries on after it").containsExactly("1 | 1", "3 | 3", "10 | 10", "11 | 11"));
      assertThat(b.connectors().status("items").orElseThrow().counters()).containsEntry("dlq", 1L);
      await().atMost(10, TimeUnit.SECONDS).untilAsserted(() -> assertThat(cursor(db, "p")).containsExactly("0", null, "2"));
      assertThat(rows(db, "select partition, last_offset from queen.sink_progress where sink = 'items' order by partition"))
          .containsExactly("p | 2", "q | 1");
    }
  }
}
