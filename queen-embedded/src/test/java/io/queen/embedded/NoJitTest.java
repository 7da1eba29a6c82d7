package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.awaitility.Awaitility.await;

import io.queen.AckStatus;
import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.SubscriptionMode;
import io.queen.testkit.TestDatabase;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * On a server with JIT (most packaged and managed PostgreSQL servers have it on), none of Queen's statements is
 * JIT-compiled: a compile costs tens of milliseconds per execution, far more than the statement. Counted through
 * {@code pg_stat_statements} (nested statements included) over a workload of every hot path: push, pop, ack, the
 * consume loop with a transactional handler, an encrypted queue, a dead letter, KV, a transaction, status, the janitor
 * and retention.
 *
 * <p>Runs where {@code pg_jit_available()} is true (the embedded server is built without JIT) and needs
 * {@code pg_stat_statements} in {@code shared_preload_libraries} there; {@code .ci/run}'s distribution server has both.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NoJitTest {

  @Test
  void noStatementOfQueenIsJitCompiled(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      try (ResultSet rs = st.executeQuery("select pg_jit_available(), current_setting('jit'),"
          + " current_setting('shared_preload_libraries')")) {
        rs.next();
        Assumptions.assumeTrue(rs.getBoolean(1) && rs.getString(2).equals("on"),
            "this server cannot JIT-compile (pg_jit_available() false or jit off): nothing to count");
        if (!rs.getString(3).contains("pg_stat_statements")) {
          fail("this server has JIT on: add pg_stat_statements to shared_preload_libraries so this test can count"
              + " JIT compilations (shared_preload_libraries = '" + rs.getString(3) + "')");
        }
      }
      st.execute("create extension if not exists pg_stat_statements");
      st.execute("alter database " + db.name() + " set pg_stat_statements.track = 'all'");
      st.execute("select pg_stat_statements_reset(0, (select oid from pg_database where datname = current_database()), 0)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.newDataSource(8)).nodeId("nojit")
        .encryptionKey("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff").adoptEncryptionKey()
        .pollInterval(Duration.ofMillis(50)).start()) {
      workload(queen);
    }
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*), sum(calls), count(*) filter (where jit_functions > 0),"
            + " coalesce(string_agg(left(regexp_replace(query, '\\s+', ' ', 'g'), 120), ' | ')"
            + "   filter (where jit_functions > 0), '')"
            + " from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())")) {
      rs.next();
      assertThat(rs.getLong(2)).as("statements counted").isGreaterThan(200);
      assertThat(rs.getLong(3)).as("statements JIT-compiled: " + rs.getString(4)).isZero();
    }
  }

  private static void workload(Queen queen) {
    String q = "orders";
    queen.queue(q).configure(c -> c.retryLimit(0).retention(Duration.ofDays(30)));
    for (int i = 0; i < 20; i++) {
      queen.queue(q).partition("p" + (i % 5)).push(Map.of("i", i));
    }
    List<Object> batch = new ArrayList<>();
    for (int i = 0; i < 100; i++) {
      batch.add(Map.of("b", i));
    }
    queen.queue(q).partition("bulk").pushAll(batch);

    List<Message> popped = queen.queue(q).group("manual").subscription(SubscriptionMode.ALL).batch(10).pop();
    assertThat(popped).isNotEmpty();
    queen.ack(popped.subList(0, popped.size() - 1));
    queen.ack(popped.get(popped.size() - 1), AckStatus.FAILED, "declined");

    try (Subscription s = queen.queue(q).group("loop").subscription(SubscriptionMode.ALL).concurrency(2).batch(10)
        .consumeInTransaction((m, tx) -> tx
            .once("done", m.stateKey("done:" + m.offset()), Kv.ttl(Duration.ofHours(1)).required())
            .push(q + "-effects", m.partition(), Map.of("offset", m.offset())))) {
      await().atMost(Duration.ofSeconds(60)).until(() -> s.acked() == 120);
    }
    queen.transaction().push(q, "tx", Map.of("t", 1)).once("tx", "k1", Kv.ttl(Duration.ofHours(1)).required())
        .commit();

    queen.kv().put("rates", "a", Map.of("n", 1), Kv.ttl(Duration.ofMinutes(5)));
    queen.kv().incr("rates", "hits", 1, Kv.forever());
    queen.kv().get("rates", "a");
    queen.kv().delete("rates", "a");

    // an encrypted queue: the key list before a sealed push, pop's key check, the count of messages waiting for a key
    queen.queue("sealed").configure(c -> c.encryption(true));
    for (int i = 0; i < 10; i++) {
      queen.queue("sealed").partition("s" + (i % 3)).push(Map.of("i", i));
    }
    List<Message> sealed = queen.queue("sealed").consumer().batch(10).partitions(3).pop();
    assertThat(sealed).isNotEmpty();
    queen.ack(sealed);

    queen.deadLetters(q).group("manual").count();
    queen.status();
    queen.runRetentionNow();
  }
}
