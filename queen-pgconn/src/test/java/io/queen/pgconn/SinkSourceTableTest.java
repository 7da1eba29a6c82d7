package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.queen.InvalidConnectorException;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * One queue can carry several source tables (a source maps each table to a queue, and two may name the same one);
 * a cdc sink writes one table. With {@code sourceTable} it applies that table's events only and passes over the
 * others ({@code ignored}); without it, it would apply them all, and two tables' rows with the same key would
 * overwrite and delete each other in the copy, so that document is refused when it is put, whichever of the two
 * comes second.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SinkSourceTableTest {
  private static final String TWO_TABLES_ONE_QUEUE = """
      {"kind": "source", "source": {"snapshot": "never", "tables": [
        {"table": "public.cats", "queue": "pets"}, {"table": "public.dogs", "queue": "pets"}]}}""";

  private static Queen node(TestDatabase db) {
    return EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start();
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void twoCdcSinksOnOneQueueEachApplyTheirOwnTable(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table cats (id bigint primary key, name text)", "create table dogs (id bigint primary key, name text)",
        "create table cats_copy (like cats including all)", "create table dogs_copy (like dogs including all)");
    try (Queen queen = node(db)) {
      queen.connectors().put("pets-src", TWO_TABLES_ONE_QUEUE);
      SourceFixture.awaitPhase(queen, "pets-src", "streaming", Duration.ofSeconds(30));
      PgConnectors.sink("cats-copy").queue("pets").table("public.cats_copy").mode(PgConnectors.SinkMode.CDC)
          .sourceTable("public.cats").putTo(queen.connectors());
      queen.connectors().put("dogs-copy", """
          {"kind": "sink", "sink": {"queue": "pets", "table": "dogs_copy", "mode": "cdc", "sourceTable": "dogs"}}""");
      // the same keys in both tables; then one table's row 1 deleted and row 2 changed
      f.sql("insert into cats values (1, 'tom'), (2, 'felix')", "insert into dogs values (1, 'rex'), (2, 'fido')");
      f.sql("delete from cats where id = 1", "update dogs set name = 'odie' where id = 2");
      await().atMost(30, TimeUnit.SECONDS).untilAsserted(() -> {
        assertThat(f.rows("select id, name from cats_copy order by id")).containsExactly("2 | felix");
        assertThat(f.rows("select id, name from dogs_copy order by id")).containsExactly("1 | rex", "2 | odie");
      });
      await().atMost(10, TimeUnit.SECONDS).untilAsserted(() -> {
        // 6 events in the queue: cats c, c, d and dogs c, c, u
        assertThat(SourceFixture.status(queen, "cats-copy").counters()).containsEntry("applied", 3L)
            .containsEntry("ignored", 3L).containsEntry("dlq", 0L);
        assertThat(SourceFixture.status(queen, "dogs-copy").counters()).containsEntry("applied", 3L)
            .containsEntry("ignored", 3L).containsEntry("dlq", 0L);
      });
    }
  }

  @Test
  void aCdcSinkWithoutSourceTableOnAQueueOfTwoTablesIsRefusedWhicheverComesSecond(TestDatabase db) throws Exception {
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      queen.connectors().put("mixed-src", TWO_TABLES_ONE_QUEUE.replace("pets", "mixed"));
      assertThatThrownBy(() -> queen.connectors().put("mixed-copy", """
          {"kind": "sink", "sink": {"queue": "mixed", "table": "cats_copy", "mode": "cdc"}}"""))
          .isInstanceOf(InvalidConnectorException.class)
          .hasMessageContaining("sink.sourceTable: missing; queue 'mixed' carries the changes of 2 tables"
              + " (public.cats, public.dogs)");
      assertThat(queen.connectors().get("mixed-copy")).as("nothing stored").isEmpty();
      // a cdc sink that names its table is fine; one that names a table no source sends there is a typo
      queen.connectors().put("mixed-copy", """
          {"kind": "sink", "sink": {"queue": "mixed", "table": "cats_copy", "mode": "cdc", "sourceTable": "public.cats"}}""");
      assertThatThrownBy(() -> queen.connectors().put("typo-copy", """
          {"kind": "sink", "sink": {"queue": "mixed", "table": "cats_copy", "mode": "cdc", "sourceTable": "public.cat"}}"""))
          .isInstanceOf(InvalidConnectorException.class)
          .hasMessageContaining("sink.sourceTable: given \"public.cat\"; the sources send queue 'mixed' the changes of"
              + " public.cats, public.dogs only");

      // the other order: the plain cdc sink first, then a source that would mix its queue
      queen.connectors().put("solo-copy", """
          {"kind": "sink", "sink": {"queue": "solo", "table": "cats_copy", "mode": "cdc"}}""");
      queen.connectors().put("solo-src", """
          {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.cats", "queue": "solo"}]}}""");
      assertThatThrownBy(() -> queen.connectors().put("solo-src2", """
          {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.dogs", "queue": "solo"}]}}"""))
          .isInstanceOf(InvalidConnectorException.class)
          .hasMessageContaining("queue 'solo' would carry the changes of public.cats, public.dogs, and the cdc sink(s)"
              + " solo-copy read it without sink.sourceTable");
      assertThat(queen.connectors().get("solo-src2")).isEmpty();
      // replacing the one source with itself is not a mix
      queen.connectors().put("solo-src", """
          {"kind": "source", "source": {"snapshot": "never", "tables": [{"table": "public.cats", "queue": "solo"}]}}""");
    }
  }

  @Test
  void sourceTableIsForCdcSinksAndNamesATable(TestDatabase db) {
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      assertThatThrownBy(() -> queen.connectors().put("u", """
          {"kind": "sink", "sink": {"queue": "q", "table": "t", "mode": "upsert", "sourceTable": "public.t"}}"""))
          .isInstanceOf(InvalidConnectorException.class)
          .hasMessageContaining("sink.sourceTable: only for mode \"cdc\"; this sink's mode is \"upsert\"");
      assertThatThrownBy(() -> queen.connectors().put("c", """
          {"kind": "sink", "sink": {"queue": "q", "table": "t", "mode": "cdc", "sourceTable": "a.b.c"}}"""))
          .isInstanceOf(InvalidConnectorException.class)
          .hasMessageContaining("sink.sourceTable: given \"a.b.c\"; allowed is the source's schema.table");
    }
  }
}
