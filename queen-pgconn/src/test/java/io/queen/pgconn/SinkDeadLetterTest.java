package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.DeadLetter;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A sink's dead letter is decided in the target transaction that moves the progress row past it, and recorded in
 * Queen after that commit. When that record is lost (Queen's transaction fails, its connection is killed, the node
 * goes away in between), the message comes again at or below its progress row: it is dead-lettered again, never
 * taken for applied and acknowledged as completed. A dead letter redriven from the dead-letter queue is tried again.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SinkDeadLetterTest {

  private static Queen node(TestDatabase db, String id) {
    return EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId(id)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start();
  }

  private static void sql(TestDatabase db, String s) throws Exception {
    new SourceFixture(db).sql(s);
  }

  private static List<String> rows(TestDatabase db, String q) throws Exception {
    return new SourceFixture(db).rows(q);
  }

  /** The sink group's lag on its queue. */
  private static long lag(Queen q, String name) {
    return q.status().queue(name).group("pg-" + name).lag();
  }

  private static long value(TestDatabase db, String q) throws Exception {
    return Long.parseLong(rows(db, q).get(0));
  }

  /** A table with a check the second message breaks, and a sink that dead-letters at the first refusal. */
  private static void table(TestDatabase db, String name) throws Exception {
    sql(db, "CREATE TABLE " + name + " (id bigint PRIMARY KEY, qty int NOT NULL CONSTRAINT " + name
        + "_qty_positive CHECK (qty > 0))");
  }

  private static void putSink(Queen q, String name) {
    q.connectors().put(name, "{\"kind\": \"sink\", \"sink\": {\"queue\": \"" + name + "\", \"table\": \"" + name
        + "\", \"mode\": \"upsert\", \"maxAttempts\": 1}}");
  }

  private static void pushThree(Queen q, String queue) {
    q.push(List.of(PushItem.to(queue, "p", Map.of("id", 1, "qty", 1)), PushItem.to(queue, "p", Map.of("id", 2, "qty", -5)),
        PushItem.to(queue, "p", Map.of("id", 3, "qty", 3))));
  }

  /**
   * Queen's dead-letter table refuses the first insert (its trigger counts through a sequence, which no rollback
   * undoes): the sink's Queen transaction fails after the target committed the batch with the progress row past the
   * refused message. The batch comes again; the dead letter is found in queen.sink_dead_letters and dead-lettered.
   */
  @Test
  void aDeadLetterWhoseRecordInQueenFailsIsDeadLetteredAgainNotTakenForApplied(TestDatabase db) throws Exception {
    table(db, "refused");
    try (Queen a = node(db, "dl-a")) {
      sql(db, "CREATE SEQUENCE dl_refusals");
      sql(db, "CREATE FUNCTION refuse_first_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " IF nextval('dl_refusals') = 1 THEN RAISE EXCEPTION 'dead letters are unavailable'; END IF;"
          + " RETURN NEW; END $$");
      sql(db, "CREATE TRIGGER refuse_first BEFORE INSERT ON queen.dead_letters FOR EACH ROW"
          + " EXECUTE FUNCTION refuse_first_dead_letter()");
      putSink(a, "refused");
      pushThree(a, "refused");
      await().atMost(60, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.deadLetters("refused").group("pg-refused").list(10, null)).hasSize(1));
      assertThat(value(db, "select last_value from dl_refusals")).as("the first record was refused").isGreaterThan(1);
      DeadLetter d = a.deadLetters("refused").group("pg-refused").list(10, null).get(0);
      assertThat(d.offset()).isEqualTo(1);
      assertThat(d.error()).as("recorded again from the target's row, its values masked as in every record in Queen")
          .isEqualTo("sink 'refused' gave up after 1 attempt(s): new row for relation \"…\" violates check constraint"
              + " \"…\"; constraint refused_qty_positive; table public.refused; SQLState 23514");
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id, qty from refused order by id")).containsExactly("1 | 1", "3 | 3"));
      await().atMost(10, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.connectors().status("refused").orElseThrow().counters()).containsEntry("applied", 2L)
              .containsEntry("dlq", 1L).containsEntry("skipped", 2L)); // the batch again: 1 and 3 applied before
      assertThat(rows(db, "select partition_id is not null, \"offset\", error from queen.sink_dead_letters"
          + " where sink = 'refused'")).as("the database's message as PostgreSQL wrote it").containsExactly("t | 1 | new"
              + " row for relation \"refused\" violates check constraint \"refused_qty_positive\"; constraint"
              + " refused_qty_positive; table public.refused; SQLState 23514");
      await().atMost(10, TimeUnit.SECONDS).until(() -> lag(a, "refused") == 0);
    }
  }

  /**
   * The batch that comes again after Queen's record of its dead letter failed holds the messages after it, applied
   * the first time. Even if the target would accept the dead letter now (here: from the moment the first record was
   * tried), it is dead-lettered again, not applied after the messages that follow it (an older row over a newer one).
   */
  @Test
  void aDeadLetterThatComesBackWithTheMessagesAfterItIsNotAppliedAfterThem(TestDatabase db) throws Exception {
    sql(db, "CREATE SEQUENCE dl_tried");
    sql(db, "CREATE FUNCTION dl_tried_yet() RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT is_called FROM dl_tried $$");
    sql(db, "CREATE TABLE later (id bigint PRIMARY KEY, qty int NOT NULL CONSTRAINT later_qty CHECK (qty > 0"
        + " OR dl_tried_yet()))");
    try (Queen a = node(db, "dl-l")) {
      sql(db, "CREATE FUNCTION refuse_first_later() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " IF nextval('dl_tried') = 1 THEN RAISE EXCEPTION 'dead letters are unavailable'; END IF;"
          + " RETURN NEW; END $$");
      sql(db, "CREATE TRIGGER refuse_first_later BEFORE INSERT ON queen.dead_letters FOR EACH ROW"
          + " EXECUTE FUNCTION refuse_first_later()");
      putSink(a, "later");
      pushThree(a, "later");
      await().atMost(60, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.deadLetters("later").group("pg-later").list(10, null)).extracting(DeadLetter::offset)
              .containsExactly(1L));
      assertThat(value(db, "select last_value from dl_tried")).as("the first record failed").isGreaterThan(1);
      await().atMost(10, TimeUnit.SECONDS).until(() -> lag(a, "later") == 0);
      assertThat(rows(db, "select id, qty from later order by id")).containsExactly("1 | 1", "3 | 3");
    }
  }

  /**
   * The same with the connection killed: the trigger terminates its own backend at the first dead-letter insert,
   * mid-transaction.
   */
  @Test
  void aDeadLetterWhoseConnectionIsKilledMidRecordIsDeadLetteredOnce(TestDatabase db) throws Exception {
    table(db, "killed");
    try (Queen a = node(db, "dl-k")) {
      sql(db, "CREATE SEQUENCE dl_kills");
      sql(db, "CREATE FUNCTION kill_first_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " IF nextval('dl_kills') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5);"
          + " END IF; RETURN NEW; END $$");
      sql(db, "CREATE TRIGGER kill_first BEFORE INSERT ON queen.dead_letters FOR EACH ROW"
          + " EXECUTE FUNCTION kill_first_dead_letter()");
      putSink(a, "killed");
      pushThree(a, "killed");
      await().atMost(60, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.deadLetters("killed").group("pg-killed").list(10, null)).hasSize(1));
      assertThat(value(db, "select last_value from dl_kills")).as("the first record was killed").isGreaterThan(1);
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id, qty from killed order by id")).containsExactly("1 | 1", "3 | 3"));
      await().atMost(10, TimeUnit.SECONDS).until(() -> lag(a, "killed") == 0);
      assertThat(a.deadLetters("killed").group("pg-killed").count()).isEqualTo(1);
    }
  }

  /**
   * Node A decides the dead letter in the target but cannot record it in Queen while the dead-letter table refuses
   * every insert; A closes (as a node that goes away between the two commits), the table accepts again, and node B,
   * which takes the partition over, dead-letters the message: once, with A's rows applied once.
   */
  @Test
  void aNodeThatTakesOverDeadLettersWhatTheFirstDecidedButNeverRecorded(TestDatabase db) throws Exception {
    table(db, "handover");
    sql(db, "CREATE TABLE dl_closed (x int)");
    sql(db, "INSERT INTO dl_closed VALUES (1)");
    sql(db, "CREATE SEQUENCE dl_tries");
    Queen a = node(db, "dl-a2");
    try {
      sql(db, "CREATE FUNCTION refuse_while_closed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " PERFORM nextval('dl_tries'); IF EXISTS (SELECT 1 FROM dl_closed) THEN"
          + " RAISE EXCEPTION 'dead letters are closed'; END IF; RETURN NEW; END $$");
      sql(db, "CREATE TRIGGER refuse_while_closed BEFORE INSERT ON queen.dead_letters FOR EACH ROW"
          + " EXECUTE FUNCTION refuse_while_closed()");
      putSink(a, "handover");
      pushThree(a, "handover");
      await().atMost(60, TimeUnit.SECONDS).until(() -> value(db, "select count(*) from handover") == 2
          && value(db, "select last_value from dl_tries") >= 2);
      assertThat(rows(db, "select \"offset\" from queen.sink_dead_letters where sink = 'handover'")).containsExactly("1");
    } finally {
      a.close();
    }
    assertThat(rows(db, "select count(*) from queen.dead_letters where group_name = 'pg-handover'"))
        .as("nothing recorded in Queen by A").containsExactly("0");
    sql(db, "DELETE FROM dl_closed");
    try (Queen b = node(db, "dl-b2")) {
      await().atMost(60, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(b.deadLetters("handover").group("pg-handover").list(10, null)).extracting(DeadLetter::offset)
              .containsExactly(1L));
      await().atMost(10, TimeUnit.SECONDS).until(() -> lag(b, "handover") == 0);
      assertThat(rows(db, "select id, qty from handover order by id")).containsExactly("1 | 1", "3 | 3");
      assertThat(b.connectors().status("handover").orElseThrow().counters()).containsEntry("dlq", 1L)
          .containsEntry("applied", 0L).containsEntry("skipped", 2L);
    }
  }

  /**
   * A sink's dead letter redriven from the dead-letter queue is tried again, not dropped as applied: refused again,
   * it is dead-lettered again; once the target accepts it, it is applied, and its record leaves
   * queen.sink_dead_letters.
   */
  @Test
  void aRedrivenDeadLetterIsTriedAgainAndAppliedOnceTheTargetAcceptsIt(TestDatabase db) throws Exception {
    table(db, "redriven");
    try (Queen a = node(db, "dl-r")) {
      putSink(a, "redriven");
      pushThree(a, "redriven");
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.deadLetters("redriven").group("pg-redriven").count()).isEqualTo(1));
      await().atMost(10, TimeUnit.SECONDS).until(() -> lag(a, "redriven") == 0);

      // redriven while the target still refuses it: dead-lettered again
      assertThat(a.deadLetters("redriven").group("pg-redriven").redriveAll()).isEqualTo(1);
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.connectors().status("redriven").orElseThrow().counters()).containsEntry("dlq", 2L));
      assertThat(a.deadLetters("redriven").group("pg-redriven").list(10, null)).extracting(DeadLetter::offset)
          .containsExactly(1L);
      assertThat(rows(db, "select id, qty from redriven order by id")).containsExactly("1 | 1", "3 | 3");

      // the target accepts it now: the redrive applies it
      sql(db, "ALTER TABLE redriven DROP CONSTRAINT redriven_qty_positive");
      assertThat(a.deadLetters("redriven").group("pg-redriven").redriveAll()).isEqualTo(1);
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(rows(db, "select id, qty from redriven order by id")).containsExactly("1 | 1", "2 | -5", "3 | 3"));
      await().atMost(10, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(a.connectors().status("redriven").orElseThrow().counters()).containsEntry("applied", 3L)
              .containsEntry("skipped", 0L).containsEntry("dlq", 2L));
      assertThat(a.deadLetters("redriven").group("pg-redriven").count()).isZero();
      assertThat(rows(db, "select count(*) from queen.sink_dead_letters where sink = 'redriven'")).containsExactly("0");
      assertThat(rows(db, "select last_offset from queen.sink_progress where sink = 'redriven'"))
          .as("a redrive never moves the progress row back").containsExactly("2");
    }
  }
}
