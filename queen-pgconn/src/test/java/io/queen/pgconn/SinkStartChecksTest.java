package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A sink checks its target before it consumes: what an operator sees when the check fails. Each refusal is phase
 * {@code error} with its code, a sentence that names the object and the fix (never a value or the statement
 * text), and one more error counted; nothing is consumed. The refusals' codes were not tested before, and a
 * connection refused for SSL or a progress table out of reach showed only the driver's sanitised text.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SinkStartChecksTest {

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', textBlock = """
      table_missing    | {"kind": "sink", "sink": {"queue": "q1", "table": "public.nowhere", "mode": "upsert"}}                                    | table public.nowhere: the sink's table does not exist
      no_key           | {"kind": "sink", "sink": {"queue": "q2", "table": "public.keyless", "mode": "upsert"}}                                    | table public.keyless: modes upsert and cdc need a primary key
      statement_invalid| {"kind": "sink", "sink": {"queue": "q3", "mode": "sql", "statement": "UPDATE nowhere SET v = $1::int", "params": ["$.v"]}} | sink.statement (
      metadata_column_missing | {"kind": "sink", "sink": {"queue": "q4", "table": "public.keyed", "mode": "upsert", "metadata": {"offset": "no_such_col"}}} | sink.metadata.offset names column
      connect_failed   | {"kind": "sink", "connection": {"host": "127.0.0.1", "port": 1, "database": "x", "user": "u", "password": "p-secret", "sslMode": "disable"}, "sink": {"queue": "q5", "table": "public.keyed", "mode": "upsert"}} | cannot reach the target database: check connection.host, port, sslMode
      """)
  void aRefusedStartSaysWhatAndHowToFixIt(String code, String doc, String begins, TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists keyless (v int)");
      st.execute("create table if not exists keyed (id text primary key, v int)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey("0123456789abcdef".repeat(4))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("checked", doc);
      await().atMost(Duration.ofSeconds(30)).until(() -> "error".equals(status(queen).phase()));
      ConnectorStatus s = status(queen);
      assertThat(s.errorCode()).isEqualTo(code);
      assertThat(s.error()).contains(begins).doesNotContain("p-secret").doesNotContain("UPDATE nowhere");
      assertThat(s.counters().get("errors")).isPositive();
      assertThat(queen.connectors().delete("checked")).isTrue();
    }
  }

  /**
   * A sink whose queue does not exist (a misspelt name, or no push yet) is not an error, but it must not read as a
   * healthy idle sink either: phase running (a readiness check waiting for it must not wait for a push) with code
   * queue_missing until the queue exists; no error counted.
   */
  @Test
  void aSinkOnAQueueThatDoesNotExistSaysItWaitsForIt(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists keyed (id text primary key, v int)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).pollInterval(Duration.ofMillis(100))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("checked", """
          {"kind": "sink", "sink": {"queue": "not-pushed-yet", "table": "public.keyed", "mode": "upsert"}}""");
      await().atMost(Duration.ofSeconds(30)).until(() -> "queue_missing".equals(status(queen).errorCode()));
      ConnectorStatus waiting = status(queen);
      assertThat(waiting.phase()).isEqualTo("running");
      assertThat(waiting.error()).startsWith("queue 'not-pushed-yet': the sink's queue does not exist yet");
      assertThat(waiting.counters().get("errors")).isZero();
      queen.queue("not-pushed-yet").partition("a").push(java.util.Map.of("id", "a", "v", 1));
      await().atMost(Duration.ofSeconds(30)).until(() -> status(queen).errorCode() == null
          && status(queen).counters().get("applied") == 1);
      assertThat(status(queen).phase()).isEqualTo("running");
      assertThat(queen.connectors().delete("checked")).isTrue();
    }
  }

  /**
   * A database name that the server does not have: its own code, not the progress table's nor a network fault. The
   * login is a role of the test's own with that password, so that a server that checks passwords lets it in and
   * answers about the database.
   */
  @Test
  void aDatabaseThatDoesNotExistIsNamedAsSuch(TestDatabase db) throws Exception {
    String role = "sink_nodb_" + Long.toHexString(System.nanoTime());
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create role " + role + " login password 'p-secret3'");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey("0123456789abcdef".repeat(4))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("checked", "{\"kind\": \"sink\", \"connection\": {\"host\": \"" + db.host() + "\", \"port\": "
          + db.port() + ", \"database\": \"no_such_db\", \"user\": \"" + role + "\", \"password\": \"p-secret3\","
          + " \"sslMode\": \"disable\"}, \"sink\": {\"queue\": \"q7\", \"table\": \"public.keyed\", \"mode\": \"upsert\"}}");
      await().atMost(Duration.ofSeconds(30)).until(() -> "error".equals(status(queen).phase()));
      ConnectorStatus s = status(queen);
      assertThat(s.errorCode()).isEqualTo("database_missing");
      assertThat(s.error()).startsWith("the server has no database of the name in connection.database")
          .contains("3D000").doesNotContain("p-secret3");
      assertThat(queen.connectors().delete("checked")).isTrue();
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("drop role " + role);
      }
    }
  }

  /**
   * A role that may log in but not connect to the target database (42501 at login) has its own code, whose fix is the
   * GRANT: not progress_table, which a 42501 from a statement on the progress table means.
   */
  @Test
  void aRoleWithoutConnectOnTheTargetIsNamedAsSuch(TestDatabase db) throws Exception {
    String suffix = Long.toHexString(System.nanoTime());
    String role = "sink_noconnect_" + suffix;
    String target = "sink_denied_" + suffix;
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create role " + role + " login password 'p-secret4'");
      st.execute("create database " + target);
      st.execute("revoke connect on database " + target + " from public");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey("0123456789abcdef".repeat(4))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("checked", "{\"kind\": \"sink\", \"connection\": {\"host\": \"" + db.host() + "\", \"port\": "
          + db.port() + ", \"database\": \"" + target + "\", \"user\": \"" + role + "\", \"password\": \"p-secret4\","
          + " \"sslMode\": \"disable\"}, \"sink\": {\"queue\": \"q8\", \"table\": \"public.keyed\", \"mode\": \"upsert\"}}");
      await().atMost(Duration.ofSeconds(30)).until(() -> "error".equals(status(queen).phase()));
      ConnectorStatus s = status(queen);
      assertThat(s.errorCode()).isEqualTo("connect_privilege");
      assertThat(s.error()).startsWith("the server refused connection.user the database in connection.database")
          .contains("42501").doesNotContain("p-secret4");
      assertThat(queen.connectors().delete("checked")).isTrue();
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("drop database " + target);
        st.execute("drop role " + role);
      }
    }
  }

  @Test
  void aSinkWithoutCreateOnTheDatabaseCannotMakeItsProgressTableAndSaysSo(TestDatabase db) throws Exception {
    String role = "sink_nocreate_" + Long.toHexString(System.nanoTime());
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists keyed (id text primary key, v int)");
      st.execute("create role " + role + " login password 'p-secret2'");
      st.execute("grant select, insert, update, delete on keyed to " + role);
      st.execute("revoke create on database \"" + db.name() + "\" from public");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey("0123456789abcdef".repeat(4))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("checked", "{\"kind\": \"sink\", \"connection\": {\"host\": \"" + db.host() + "\", \"port\": "
          + db.port() + ", \"database\": \"" + db.name() + "\", \"user\": \"" + role + "\", \"password\": \"p-secret2\","
          + " \"sslMode\": \"disable\"}, \"sink\": {\"queue\": \"q6\", \"table\": \"public.keyed\", \"mode\": \"upsert\"}}");
      await().atMost(Duration.ofSeconds(30)).until(() -> "error".equals(status(queen).phase()));
      ConnectorStatus s = status(queen);
      assertThat(s.errorCode()).isEqualTo("progress_table");
      assertThat(s.error()).startsWith("the sink's tables queen.sink_progress and queen.sink_dead_letters cannot be created")
          .contains("42501").doesNotContain("p-secret2");
      assertThat(queen.connectors().delete("checked")).isTrue();
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("drop owned by " + role);
        st.execute("drop role " + role);
      }
    }
  }

  /**
   * The README's way for a role without CREATE: the two tables created beforehand by someone who may, the sink's role
   * granted rows on them. The sink uses them as they are (CREATE ... IF NOT EXISTS would still check the privilege).
   */
  @Test
  void aSinkWithoutCreateRunsOnTablesCreatedForIt(TestDatabase db) throws Exception {
    String role = "sink_precreated_" + Long.toHexString(System.nanoTime());
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists keyed7 (id text primary key, v int)");
      st.execute("create schema if not exists queen");
      st.execute("""
          CREATE TABLE IF NOT EXISTS queen.sink_progress (
            sink         text        NOT NULL,
            partition_id bigint      NOT NULL,
            partition    text        NOT NULL,
            last_offset  bigint      NOT NULL,
            tried_offset bigint,
            tries        int         NOT NULL DEFAULT 0,
            updated_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (sink, partition_id))""");
      st.execute("""
          CREATE TABLE IF NOT EXISTS queen.sink_dead_letters (
            sink         text        NOT NULL,
            partition_id bigint      NOT NULL,
            "offset"     bigint      NOT NULL,
            error        text        NOT NULL,
            created_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (sink, partition_id, "offset"))""");
      st.execute("create role " + role + " login password 'p-secret3'");
      st.execute("grant usage on schema queen to " + role);
      st.execute("grant select, insert, update, delete on keyed7, queen.sink_progress, queen.sink_dead_letters to "
          + role);
      st.execute("revoke create on database \"" + db.name() + "\" from public");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey("0123456789abcdef".repeat(4))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("checked", "{\"kind\": \"sink\", \"connection\": {\"host\": \"" + db.host() + "\", \"port\": "
          + db.port() + ", \"database\": \"" + db.name() + "\", \"user\": \"" + role + "\", \"password\": \"p-secret3\","
          + " \"sslMode\": \"disable\"}, \"sink\": {\"queue\": \"q7\", \"table\": \"public.keyed7\", \"mode\": \"upsert\"}}");
      queen.queue("q7").partition("a").push(java.util.Map.of("id", "x", "v", 7));
      await().atMost(Duration.ofSeconds(30)).untilAsserted(() ->
          assertThat(status(queen).counters()).containsEntry("applied", 1L));
      assertThat(status(queen).phase()).isEqualTo("running");
      assertThat(queen.connectors().delete("checked")).isTrue();
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("drop owned by " + role);
        st.execute("drop role " + role);
      }
    }
  }

  private static ConnectorStatus status(Queen queen) {
    return queen.connectors().status("checked").orElseThrow();
  }
}
