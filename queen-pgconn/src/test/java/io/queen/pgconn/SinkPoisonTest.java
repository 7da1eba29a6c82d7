package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.DeadLetter;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * How often a poison message runs against the target, counted by the target itself: a trigger on the table takes a
 * value of a sequence each time PostgreSQL runs the poison's row (a sequence is not rolled back with the refused
 * statement): exactly maxAttempts, alone or in a statement shared with other messages. And what its dead letter says:
 * in the target ({@code queen.sink_dead_letters}, beside the data) the database's message as PostgreSQL wrote it, with
 * the constraint, column, table and SQLState; in Queen's dead-letter record and in the logs the same with values
 * masked.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SinkPoisonTest {
  private TestDatabase db;
  private SourceFixture f;

  /** A database of its own per test: the class's one would hold the other tests' queue, table and sequence. */
  @BeforeEach
  void table(TestDatabase classDb) throws Exception {
    db = classDb.server().createDatabase("poison");
    f = new SourceFixture(db);
    f.sql("CREATE TABLE stock (id bigint PRIMARY KEY, qty int NOT NULL CONSTRAINT qty_not_negative CHECK (qty >= 0))",
        "CREATE SEQUENCE poison_runs",
        "CREATE FUNCTION count_poison_runs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            + " IF NEW.qty < 0 THEN PERFORM nextval('poison_runs'); END IF; RETURN NEW; END $$",
        "CREATE TRIGGER count_poison_runs BEFORE INSERT OR UPDATE ON stock FOR EACH ROW"
            + " EXECUTE FUNCTION count_poison_runs()");
  }

  @AfterEach
  void drop() {
    db.close();
  }

  private Queen node() {
    return EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start();
  }

  /** How many times PostgreSQL ran the poison's row. */
  private long runs() throws Exception {
    return f.count("select case when is_called then last_value else 0 end from poison_runs");
  }

  private static void putSink(Queen q, String mode) {
    String body = "sql".equals(mode)
        ? "\"mode\": \"sql\", \"statement\": \"INSERT INTO stock (id, qty) VALUES ($1::bigint, $2::int)\","
            + " \"params\": [\"$.id\", \"$.qty\"]"
        : "\"table\": \"stock\", \"mode\": \"" + mode + "\"";
    q.connectors().put("stock-sink", "{\"kind\": \"sink\", \"sink\": {\"queue\": \"stock\", " + body
        + ", \"maxAttempts\": 3}}");
  }

  private DeadLetter deadLetter(Queen q) {
    await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
        assertThat(q.deadLetters("stock").group("pg-stock-sink").list(10, null)).hasSize(1));
    await().atMost(10, TimeUnit.SECONDS).until(() -> q.status().queue("stock").group("pg-stock-sink").lag() == 0);
    return q.deadLetters("stock").group("pg-stock-sink").list(10, null).get(0);
  }

  /**
   * A poison that comes alone runs exactly maxAttempts times: the statement that refused it held nothing else, so its
   * refusal is that try, not run again on its own.
   */
  @Test
  void aPoisonRunsExactlyMaxAttemptsTimesAndItsDeadLetterInTheTargetKeepsTheDatabasesMessage() throws Exception {
    try (LogCapture logs = LogCapture.start(); Queen q = node()) {
      putSink(q, "upsert");
      q.push(List.of(PushItem.to("stock", "s", Map.of("id", 2, "qty", -5))));
      DeadLetter d = deadLetter(q);
      assertThat(runs()).as("the poison's row ran exactly maxAttempts times").isEqualTo(3);
      assertThat(d.attempts()).as("Queen's record counts the same tries").isEqualTo(3);
      assertThat(d.error()).isEqualTo("sink 'stock-sink' gave up after 3 attempt(s): SQLException (sanitised"
          + " org.postgresql.util.PSQLException, SQLState 23514): new row for relation \"…\" violates check constraint"
          + " \"…\"; constraint qty_not_negative; table stock");
      assertThat(f.rows("select \"offset\", error from queen.sink_dead_letters where sink = 'stock-sink'"))
          .containsExactly("0 | new row for relation \"stock\" violates check constraint \"qty_not_negative\";"
              + " constraint qty_not_negative; table public.stock; SQLState 23514");
      assertThat(logs.linesWith("refused 3 time(s), dead-lettered")).singleElement().asString()
          .contains("violates check constraint \"…\"; constraint qty_not_negative");

      q.push(List.of(PushItem.to("stock", "s", Map.of("id", 3, "qty", 1))));
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(f.rows("select id, qty from stock")).containsExactly("3 | 1"));
      assertThat(runs()).isEqualTo(3);
    }
  }

  /**
   * A poison runs exactly maxAttempts times whether it comes alone or shares the batch's one statement with good
   * messages. In a shared statement PostgreSQL's error does not say which row it refused, so each message then runs on
   * its own: the poison is the first refused there, and it is charged two tries, the statement's and its own. The
   * count is kept on its partition's progress row in the target, so a later delivery goes on from it; the good
   * messages land once. Its dead letter in the target keeps the database's message as PostgreSQL wrote it.
   */
  @ParameterizedTest(name = "maxAttempts {0}, {1}")
  @CsvSource({"1, alone", "2, alone", "3, alone", "1, in a batch", "2, in a batch", "3, in a batch"})
  void aPoisonRunsExactlyMaxAttemptsTimesAloneOrInABatchStatement(int maxAttempts, String how) throws Exception {
    boolean batch = how.equals("in a batch");
    try (Queen q = node()) {
      q.queue("stock").configure(b -> b.retryDelay(Duration.ofMillis(200)));
      q.push(batch ? List.of(PushItem.to("stock", "s", Map.of("id", 1, "qty", 1)),
              PushItem.to("stock", "s", Map.of("id", 2, "qty", -5)),
              PushItem.to("stock", "s", Map.of("id", 3, "qty", 3)))
          : List.of(PushItem.to("stock", "s", Map.of("id", 2, "qty", -5))));
      // after the push: the first batch holds all of them
      q.connectors().put("stock-sink", "{\"kind\": \"sink\", \"sink\": {\"queue\": \"stock\", \"table\": \"stock\","
          + " \"mode\": \"upsert\", \"maxAttempts\": " + maxAttempts + "}}");
      DeadLetter d = deadLetter(q);
      assertThat(d.offset()).isEqualTo(batch ? 1 : 0);
      assertThat(runs()).as("the poison's row ran exactly maxAttempts times").isEqualTo(maxAttempts);
      assertThat(d.error()).isEqualTo("sink 'stock-sink' gave up after " + maxAttempts + " attempt(s): SQLException"
          + " (sanitised org.postgresql.util.PSQLException, SQLState 23514): new row for relation \"…\" violates check"
          + " constraint \"…\"; constraint qty_not_negative; table stock");
      // Queen's count is of deliveries refused: the first of a poison in a shared statement held two tries
      assertThat(d.attempts()).isEqualTo(batch && maxAttempts > 1 ? maxAttempts - 1 : maxAttempts);
      assertThat(f.rows("select \"offset\", error from queen.sink_dead_letters where sink = 'stock-sink'"))
          .containsExactly((batch ? "1" : "0") + " | new row for relation \"stock\" violates check constraint"
              + " \"qty_not_negative\"; constraint qty_not_negative; table public.stock; SQLState 23514");
      await().atMost(10, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(f.rows("select id, qty from stock order by id"))
              .containsExactlyElementsOf(batch ? List.of("1 | 1", "3 | 3") : List.of()));
      assertThat(q.connectors().status("stock-sink").orElseThrow().counters())
          .as("the good messages landed once").containsEntry("applied", batch ? 2L : 0L)
          .containsEntry("skipped", 0L).containsEntry("dlq", 1L);
    }
  }

  /**
   * In sql mode a run of messages goes as one JDBC batch: a poison alone in it is refused by it, and that refusal is
   * its try, as for a row statement.
   */
  @Test
  void aSqlModePoisonRunsExactlyMaxAttemptsTimes() throws Exception {
    try (Queen q = node()) {
      putSink(q, "sql");
      q.push(List.of(PushItem.to("stock", "s", Map.of("id", 2, "qty", -5))));
      DeadLetter d = deadLetter(q);
      assertThat(runs()).isEqualTo(3);
      assertThat(d.attempts()).isEqualTo(3);
      assertThat(f.rows("select error from queen.sink_dead_letters where sink = 'stock-sink'")).containsExactly(
          "new row for relation \"stock\" violates check constraint \"qty_not_negative\"; constraint qty_not_negative;"
              + " table public.stock; SQLState 23514");
    }
  }

  /**
   * A message PostgreSQL quotes a value in (22P02): the target's dead letter keeps it as written; Queen's record and
   * the log lines mask it.
   */
  @Test
  void aValueInTheDatabasesMessageIsKeptInTheTargetAndMaskedInQueenAndTheLogs() throws Exception {
    try (LogCapture logs = LogCapture.start(); Queen q = node()) {
      q.connectors().put("stock-sink", """
          {"kind": "sink", "sink": {"queue": "stock", "table": "stock", "mode": "append", "maxAttempts": 1}}""");
      q.push(List.of(PushItem.to("stock", "s", Map.of("id", 7, "qty", "secret-abc"))));
      DeadLetter d = deadLetter(q);
      assertThat(f.rows("select error from queen.sink_dead_letters where sink = 'stock-sink'")).containsExactly(
          "invalid input syntax for type integer: \"secret-abc\"; SQLState 22P02");
      assertThat(d.error()).isEqualTo("sink 'stock-sink' gave up after 1 attempt(s): SQLException (sanitised"
          + " org.postgresql.util.PSQLException, SQLState 22P02): invalid input syntax for type integer: \"…\"");
      assertThat(logs.lines()).as("no value in any log line").noneMatch(l -> l.contains("secret-abc"));
    }
  }
}
