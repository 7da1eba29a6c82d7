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
 * A sink's data-error attempts are durable and shared by all nodes: each refused delivery is a FAILED ack of the
 * partition's head (the cursor's {@code attempts}) and its tries are counted on the partition's progress row in the
 * target, so a poison message tried twice on one node (its batch's shared statement, then on its own) is tried a
 * third time, and dead-lettered, by the node that takes over; the queue's {@code retryDelay} holds back only the
 * poison's partition.
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
    sql(db, "CREATE SEQUENCE poison_runs");
    sql(db, "CREATE FUNCTION count_poison_runs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        + " IF NEW.qty <= 0 THEN PERFORM nextval('poison_runs'); END IF; RETURN NEW; END $$");
    sql(db, "CREATE TRIGGER count_poison_runs BEFORE INSERT OR UPDATE ON items FOR EACH ROW"
        + " EXECUTE FUNCTION count_poison_runs()");
    Queen a = node(db, "attempts-a");
    try {
      // retryLimit 1 < maxAttempts - 1: the queue's limit does not cut the sink's attempts short
      a.queue("items").configure(b -> b.retryLimit(1).retryDelay(RETRY_DELAY));
      a.push(List.of(PushItem.to("items", "p", Map.of("id", 1, "qty", 1)),
          PushItem.to("items", "p", Map.of("id", 2, "qty", -5)),
          PushItem.to("items", "p", Map.of("id", 3, "qty", 3))));
      a.connectors().put("items", """
          {"kind": "sink", "sink": {"queue": "items", "table": "items", "mode": "upsert", "maxAttempts": 3}}""");
      await().atMost(30, TimeUnit.SECONDS).until(() -> "1".equals(cursor(db, "p")[0]));
      String[] first = cursor(db, "p");
      // the batch's one statement stopped at it, then it ran on its own: two tries in the first delivery
      assertThat(first[1]).isEqualTo("sink 'items' attempt 2 of 3 refused: " + REFUSED);
      assertThat(rows(db, "select last_value from poison_runs")).containsExactly("2");
      assertThat(rows(db, "select last_offset, tried_offset, tries from queen.sink_progress where sink = 'items'"))
          .as("the tries counted beside the data").containsExactly("0 | 1 | 2");
      assertThat(first[2]).as("the message before the poison applied and acknowledged").isEqualTo("0");
      assertThat(rows(db, "select id, qty from items order by id")).containsExactly("1 | 1");

      // the poison's partition waits its retryDelay; another partition's messages do not wait for it
      a.push(List.of(PushItem.to("items", "q", Map.of("id", 10, "qty", 10)),
          PushItem.to("items", "q", Map.of("id", 11, "qty", 11))));
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id from items where id >= 10 order by id")).containsExactly("10", "11"));
      assertThat(cursor(db, "p")[0]).as("applied while the poison waited in its backoff").isEqualTo("1");
      assertThat(a.connectors().status("items").orElseThrow().counters()).containsEntry("dlq", 0L);
    } finally {
      a.close(); // within the retry delay: node A does not try a third time
    }
    assertThat(cursor(db, "p")[0]).as("the count outlives the node").isEqualTo("1");
    assertThat(rows(db, "select last_value from poison_runs")).containsExactly("2");
    assertThat(rows(db, "select id, qty from items order by id")).containsExactly("1 | 1", "10 | 10", "11 | 11");

    try (Queen b = node(db, "attempts-b")) {
      assertThat(b.deadLetters("items").group("pg-items").list(10, null)).isEmpty();
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(b.deadLetters("items").group("pg-items").list(10, null)).hasSize(1));
      DeadLetter d = b.deadLetters("items").group("pg-items").list(10, null).get(0);
      assertThat(d.partition()).isEqualTo("p");
      assertThat(d.offset()).isEqualTo(1);
      assertThat(rows(db, "select last_value from poison_runs")).as("exactly maxAttempts in all, over two nodes")
          .containsExactly("3");
      assertThat(d.error()).isEqualTo("sink 'items' gave up after 3 attempt(s): " + REFUSED);
      assertThat(d.attempts()).as("Queen counts the deliveries refused").isEqualTo(2);
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() -> assertThat(rows(db, "select id, qty from items order by id"))
          .as("its partition carries on after it").containsExactly("1 | 1", "3 | 3", "10 | 10", "11 | 11"));
      assertThat(b.connectors().status("items").orElseThrow().counters()).containsEntry("dlq", 1L);
      await().atMost(10, TimeUnit.SECONDS).untilAsserted(() -> assertThat(cursor(db, "p")).containsExactly("0", null, "2"));
      assertThat(rows(db, "select partition, last_offset from queen.sink_progress where sink = 'items' order by partition"))
          .containsExactly("p | 2", "q | 1");
      assertThat(rows(db, "select last_value from poison_runs")).containsExactly("3");
    }
  }

  /**
   * The target committed the first delivery (the message before the poison applied, the poison's two tries counted on
   * its progress row), then Queen refused the FAILED ack of it, as when the node dies between the two commits: the
   * cursor counts nothing and the batch runs again at attempt 1 (here the sink's retry; after a crash, the next
   * holder of the lease). The progress row's count holds: the poison runs once more, on its own, and is dead-lettered
   * at exactly maxAttempts tries.
   */
  @Test
  void aFailedAckInQueenAfterTheTargetCommittedCostsNoExtraTry(TestDatabase classDb) throws Exception {
    try (TestDatabase db = classDb.server().createDatabase("attempts_lost")) {
      failedAckCostsNoExtraTry(db);
    }
  }

  private static void failedAckCostsNoExtraTry(TestDatabase db) throws Exception {
    sql(db, "CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL CONSTRAINT qty_positive CHECK (qty > 0))");
    sql(db, "CREATE SEQUENCE poison_runs");
    sql(db, "CREATE FUNCTION count_poison_runs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        + " IF NEW.qty <= 0 THEN PERFORM nextval('poison_runs'); END IF; RETURN NEW; END $$");
    sql(db, "CREATE TRIGGER count_poison_runs BEFORE INSERT OR UPDATE ON items FOR EACH ROW"
        + " EXECUTE FUNCTION count_poison_runs()");
    try (Queen a = node(db, "attempts-lost")) {
      sql(db, "CREATE SEQUENCE failed_acks");
      sql(db, "CREATE FUNCTION refuse_failed_acks() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " IF NEW.last_error IS DISTINCT FROM OLD.last_error AND NEW.last_error LIKE 'sink ''items'' attempt %' THEN"
          + " PERFORM nextval('failed_acks'); RAISE EXCEPTION 'acks are unavailable'; END IF; RETURN NEW; END $$");
      sql(db, "CREATE TRIGGER refuse_failed_acks BEFORE UPDATE ON queen.cursors FOR EACH ROW"
          + " EXECUTE FUNCTION refuse_failed_acks()");
      a.queue("items").configure(b -> b.retryDelay(Duration.ofMillis(200)));
      a.push(List.of(PushItem.to("items", "p", Map.of("id", 1, "qty", 1)),
          PushItem.to("items", "p", Map.of("id", 2, "qty", -5)),
          PushItem.to("items", "p", Map.of("id", 3, "qty", 3))));
      a.connectors().put("items", """
          {"kind": "sink", "sink": {"queue": "items", "table": "items", "mode": "upsert", "maxAttempts": 3}}""");
      await().atMost(60, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.deadLetters("items").group("pg-items").list(10, null)).hasSize(1));
      assertThat(rows(db, "select last_value from failed_acks")).as("the FAILED ack was refused").containsExactly("1");
      DeadLetter d = a.deadLetters("items").group("pg-items").list(10, null).get(0);
      assertThat(d.offset()).isEqualTo(1);
      assertThat(d.attempts()).as("no refused delivery recorded in Queen before it").isEqualTo(1);
      assertThat(d.error()).isEqualTo("sink 'items' gave up after 3 attempt(s): " + REFUSED);
      assertThat(rows(db, "select last_value from poison_runs")).as("two tries counted in the target, then one")
          .containsExactly("3");
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id, qty from items order by id")).containsExactly("1 | 1", "3 | 3"));
    }
  }
}
