package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
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
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).connectorRefresh(Duration.ofMillis(200))
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
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).connectorRefresh(Duration.ofMillis(200))
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
