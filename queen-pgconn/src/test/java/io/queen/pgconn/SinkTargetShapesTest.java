package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.InvalidConnectorException;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Target tables whose shape the sink once misread, each of which made every batch fail and retry for good while the
 * start check passed: a primary key with an INCLUDE list (taken as part of the key, so ON CONFLICT named no unique
 * index), a deferrable primary key beside a plain unique index (ON CONFLICT cannot use a deferrable one), and
 * columns whose names need quoting ({@code unit price}, {@code prénom}, a double quote), which were refused.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SinkTargetShapesTest {

  @Test
  void upsertsIntoTablesWithIncludeListsDeferrableKeysAndNamesThatNeedQuoting(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table inc (id text, v int, note text, primary key (id) include (v))");
      st.execute("create table defer (id text primary key deferrable, code text not null unique, v int)");
      st.execute("create table odd (id text primary key, \"unit price\" numeric, \"prénom\" text, \"a\"\"b\" int)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("inc", """
          {"kind": "sink", "sink": {"queue": "inc", "table": "inc", "mode": "upsert"}}""");
      queen.connectors().put("defer", """
          {"kind": "sink", "sink": {"queue": "defer", "table": "defer", "mode": "upsert"}}""");
      queen.connectors().put("odd", """
          {"kind": "sink", "sink": {"queue": "odd", "table": "odd", "mode": "upsert"}}""");
      for (int round = 0; round < 2; round++) { // the second round updates the rows the first inserted
        List<PushItem> inc = new ArrayList<>();
        List<PushItem> defer = new ArrayList<>();
        List<PushItem> odd = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
          inc.add(PushItem.of("k" + i, row("id", "k" + i, "v", i + round, "note", "r" + round)));
          defer.add(PushItem.of("c" + i, row("id", "d" + i, "code", "c" + i, "v", i + round)));
          ObjectNode o = row("id", "o" + i, "prénom", "Zoë" + round);
          o.put("unit price", new java.math.BigDecimal("1.50").add(java.math.BigDecimal.valueOf(round)));
          o.put("a\"b", i);
          odd.add(PushItem.of("o" + i, o));
        }
        queen.queue("inc").push(inc);
        queen.queue("defer").push(defer);
        queen.queue("odd").push(odd);
        int r = round;
        await().atMost(Duration.ofSeconds(30)).until(() -> rows(db, "select count(*) from inc where note = 'r" + r + "'")
            == 5 && rows(db, "select count(*) from defer where v = 4 + " + r) == 1
            && rows(db, "select count(*) from odd where \"prénom\" = 'Zoë" + r + "'") == 5);
      }
      assertThat(rows(db, "select count(*) from inc")).isEqualTo(5);
      assertThat(rows(db, "select count(*) from defer")).isEqualTo(5);
      assertThat(rows(db, "select count(*) from odd where \"unit price\" = 2.50 and \"a\"\"b\" between 0 and 4"))
          .isEqualTo(5);
      for (String name : List.of("inc", "defer", "odd")) {
        assertThat(queen.connectors().status(name).orElseThrow().counters().get("errors")).as(name).isZero();
      }
    }
  }

  /**
   * The document's table names are case-sensitive and always double-quoted: a mixed-case schema and table are
   * written as named; a name outside the rule (a double quote) is refused when the document is put, naming the rule.
   */
  @Test
  void aMixedCaseSchemaAndTableAreWrittenAsNamedAndAQuoteInANameIsRefused(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create schema \"Sales\"");
      st.execute("create table \"Sales\".\"Orders\" (id text primary key, v int)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("orders", """
          {"kind": "sink", "sink": {"queue": "orders", "table": "Sales.Orders", "mode": "upsert"}}""");
      queen.queue("orders").push(List.of(PushItem.of("k1", row("id", "k1", "v", 1)),
          PushItem.of("k2", row("id", "k2", "v", 2))));
      await().atMost(Duration.ofSeconds(30)).until(() -> rows(db, "select count(*) from \"Sales\".\"Orders\"") == 2);
      assertThat(queen.connectors().status("orders").orElseThrow().counters().get("errors")).isZero();
      assertThatThrownBy(() -> queen.connectors().put("quoted", """
          {"kind": "sink", "sink": {"queue": "quoted", "table": "Sales.Or\\"ders", "mode": "upsert"}}"""))
          .isInstanceOf(InvalidConnectorException.class).hasMessageContaining("sink.table")
          .hasMessageContaining(Ident.RULE.pattern());
    }
  }

  /**
   * A deferrable foreign key is checked when the batch commits, past the savepoints that isolate a refused row; the
   * failed commit read as transient and the batch was retried for good. The sink now checks deferred constraints at
   * once, so the bad row is dead-lettered and the others are written. And a sql-mode statement whose block comment
   * holds a {@code $n} binds its placeholders right (the comment's {@code $1} once counted as one more placeholder).
   */
  @Test
  void aDeferredForeignKeyDeadLettersItsRowAndACommentHoldsNoPlaceholder(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table parent (id int primary key)");
      st.execute("insert into parent values (1), (2)");
      st.execute("create table child (id text primary key, parent int references parent deferrable initially deferred)");
      st.execute("create table ledger (id text primary key, amount numeric)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.queue("child").configure(q -> q.retryDelay(Duration.ZERO));
      queen.connectors().put("child", """
          {"kind": "sink", "sink": {"queue": "child", "table": "child", "mode": "upsert", "maxAttempts": 2}}""");
      queen.connectors().put("ledger", """
          {"kind": "sink", "sink": {"queue": "ledger", "mode": "sql",
           "statement": "insert into ledger (id, amount) /* $1 is the id, $2 the amount */ values ($1, $2::numeric)",
           "params": ["$.id", "$.amount"]}}""");
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        items.add(PushItem.of("c" + i, row("id", "c" + i, "parent", i == 3 ? 99 : 1 + i % 2)));
      }
      queen.queue("child").push(items);
      queen.queue("ledger").push(List.of(PushItem.of("l1", row("id", "l1", "amount", "2.50"))));
      await().atMost(Duration.ofSeconds(60)).until(() -> rows(db, "select count(*) from child") == 5
          && queen.deadLetters("child").group("pg-child").count() == 1
          && rows(db, "select count(*) from ledger where amount = 2.50") == 1);
      assertThat(queen.deadLetters("child").group("pg-child").list(10, null)).singleElement()
          .satisfies(d -> assertThat(d.partition()).isEqualTo("c3"));
    }
  }

  /**
   * The table changes while the sink runs. A column added is written from the next shape read on (the sink reads
   * the shape again every refresh); a column dropped stops being named (the statement's 42703 makes the
   * sink read the shape again at once; before, every try failed and the batch came back for good); the table dropped
   * stops the loop with phase error and code table_missing, and once it is back the sink runs and writes again.
   */
  @Test
  void aTableThatChangesUnderARunningSinkIsReadAgain(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table morph (id text primary key, a int)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("morph", """
          {"kind": "sink", "sink": {"queue": "morph", "table": "morph", "mode": "upsert"}}""");
      queen.queue("morph").push(List.of(PushItem.of("k1", row("id", "k1", "a", 1, "b", 1))));
      await().atMost(Duration.ofSeconds(30)).until(() -> rows(db, "select count(*) from morph") == 1);

      sql(db, "alter table morph add column b int");
      Thread.sleep(600); // past a ConnectorOptions.refresh: the next batch reads the shape first
      queen.queue("morph").push(List.of(PushItem.of("k2", row("id", "k2", "a", 2, "b", 2))));
      await().atMost(Duration.ofSeconds(30)).until(() -> rows(db, "select count(*) from morph where b = 2") == 1);

      sql(db, "alter table morph drop column a");
      queen.queue("morph").push(List.of(PushItem.of("k3", row("id", "k3", "a", 3, "b", 3))));
      await().atMost(Duration.ofSeconds(30)).until(() -> rows(db, "select count(*) from morph where b = 3") == 1);
      assertThat(queen.deadLetters("morph").group("pg-morph").count()).isZero();

      sql(db, "drop table morph");
      queen.queue("morph").push(List.of(PushItem.of("k4", row("id", "k4", "b", 4))));
      await().atMost(Duration.ofSeconds(30)).until(() -> "error".equals(queen.connectors().status("morph").orElseThrow()
          .phase()));
      assertThat(queen.connectors().status("morph").orElseThrow().errorCode()).isEqualTo("table_missing");
      sql(db, "create table morph (id text primary key, b int)");
      await().atMost(Duration.ofSeconds(30)).until(() -> rows(db, "select count(*) from morph where b = 4") == 1);
      assertThat(queen.connectors().status("morph").orElseThrow().phase()).isEqualTo("running");
      assertThat(queen.deadLetters("morph").group("pg-morph").count()).isZero();
    }
  }

  /**
   * A row a row-level security policy refuses (42501 from the policy's check, not a privilege the role lacks) is a
   * data error: dead-lettered after maxAttempts, the rows around it written. Before, it was retried for good.
   */
  @Test
  void aRowARowSecurityPolicyRefusesIsDeadLettered(TestDatabase db) throws Exception {
    String role = "sink_rls_" + Long.toHexString(System.nanoTime());
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table guarded (id text primary key, qty int)");
      st.execute("alter table guarded enable row level security");
      st.execute("create policy everyone_reads on guarded for select using (true)");
      st.execute("create policy positive_only on guarded for insert with check (qty > 0)");
      st.execute("create policy updates on guarded for update using (true) with check (qty > 0)");
      st.execute("create role " + role + " login password 'p-rls'");
      st.execute("create schema if not exists queen");
      st.execute("create table if not exists queen.sink_progress (sink text not null, partition_id bigint not null,"
          + " partition text not null, last_offset bigint not null, tried_offset bigint, tries int not null default 0,"
          + " updated_at timestamptz not null default now(),"
          + " primary key (sink, partition_id))");
      st.execute("create table if not exists queen.sink_dead_letters (sink text not null, partition_id bigint not null,"
          + " \"offset\" bigint not null, error text not null, created_at timestamptz not null default now(),"
          + " primary key (sink, partition_id, \"offset\"))");
      st.execute("grant usage on schema queen to " + role);
      st.execute("grant select, insert, update, delete on guarded, queen.sink_progress, queen.sink_dead_letters to "
          + role);
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey("0123456789abcdef".repeat(4))
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("guarded", "{\"kind\": \"sink\", \"connection\": {\"host\": \"" + db.host()
          + "\", \"port\": " + db.port() + ", \"database\": \"" + db.name() + "\", \"user\": \"" + role
          + "\", \"password\": \"p-rls\", \"sslMode\": \"disable\"}, \"sink\": {\"queue\": \"guarded\","
          + " \"table\": \"guarded\", \"mode\": \"upsert\", \"maxAttempts\": 1}}");
      queen.queue("guarded").push(List.of(PushItem.of("p", row("id", "g1", "qty", 1)),
          PushItem.of("p", row("id", "g2", "qty", -1)), PushItem.of("p", row("id", "g3", "qty", 3))));
      await().atMost(Duration.ofSeconds(30)).until(() -> rows(db, "select count(*) from guarded") == 2
          && queen.deadLetters("guarded").group("pg-guarded").count() == 1);
      assertThat(queen.deadLetters("guarded").group("pg-guarded").list(10, null)).singleElement()
          .satisfies(d -> assertThat(d.error()).contains("42501").contains("row-level security"));
      assertThat(queen.connectors().delete("guarded")).isTrue();
    } finally {
      try (Connection c = db.connection(); Statement st = c.createStatement()) {
        st.execute("drop owned by " + role);
        st.execute("drop role " + role);
      }
    }
  }

  private static void sql(TestDatabase db, String sql) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  private static ObjectNode row(Object... kv) {
    ObjectNode o = JsonNodeFactory.instance.objectNode();
    for (int i = 0; i < kv.length; i += 2) {
      Object v = kv[i + 1];
      if (v instanceof Integer n) {
        o.put((String) kv[i], n);
      } else {
        o.put((String) kv[i], (String) v);
      }
    }
    return o;
  }

  private static long rows(TestDatabase db, String sql) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
