package io.queen.pgconn;

import static io.queen.pgconn.SourceFixture.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A source without a {@code connection} block connects with the URL and credentials of the DataSource Queen was handed,
 * whatever that DataSource is: an application pool at REPEATABLE READ, which Queen borrows through its READ COMMITTED
 * wrapper (it failed with replication_connection when the wrapper came in); a plain pgjdbc DataSource given a URL, which
 * reports every property at its default, {@code preferQueryMode=extended} among them (it failed with connect_failed:
 * "extended query protocol not supported in a replication connection", found by a campaign); and a pool whose URL
 * carries parameters the source sets itself.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourceOnAStrictPoolTest {

  @Test
  void aSourceWithoutAConnectionStreamsOnARepeatableReadPool(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table strict_rows (id bigint primary key, v text)");
    HikariConfig c = new HikariConfig();
    c.setJdbcUrl(db.jdbcUrl());
    c.setUsername(db.user());
    c.setPassword(db.password());
    c.setMaximumPoolSize(8);
    c.setTransactionIsolation("TRANSACTION_REPEATABLE_READ");
    try (HikariDataSource pool = new HikariDataSource(c);
        Queen queen = EmbeddedQueen.builder().dataSource(pool)
            .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("strict-src", SourceFixture.sourceDoc("public.strict_rows", "strict", ""));
      await().atMost(Duration.ofSeconds(30)).until(() -> status(queen, "strict-src").phase().equals("streaming"));
      f.sql("insert into strict_rows values (1, 'a')");
      List<Message> got = new ArrayList<>();
      await().atMost(Duration.ofSeconds(20)).until(() -> {
        got.addAll(queen.queue("strict").consumer().batch(10).partitions(10).pop());
        return !got.isEmpty();
      });
      assertThat(got.get(0).payload().get("op").asText()).isEqualTo("c");
      queen.connectors().delete("strict-src");
    }
  }

  @Test
  void aSourceWithoutAConnectionStreamsOnAPlainPgjdbcDataSourceGivenItsUrl(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table plain_rows (id bigint primary key, amount numeric(12,2), at timestamptz)",
        "insert into plain_rows values (1, 42.00, '2026-10-03 06:14:39.365472+00')");
    PGSimpleDataSource plain = new PGSimpleDataSource();
    plain.setUrl(db.jdbcUrl());
    plain.setUser(db.user());
    plain.setPassword(db.password());
    assertThat(plain.getUrl()).contains("preferQueryMode=extended").contains("binaryTransfer=true");
    try (Queen queen = EmbeddedQueen.builder().dataSource(plain)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("plain-src", SourceFixture.sourceDoc("public.plain_rows", "plain", "").replace(
          "\"snapshot\": \"never\"", "\"snapshot\": \"initial\""));
      await().atMost(Duration.ofSeconds(30)).until(() -> status(queen, "plain-src").phase().equals("streaming"));
      f.sql("insert into plain_rows values (2, 7.50, '2026-10-03 07:00:00+00')");
      List<Message> got = drain(queen, "plain", 2);
      assertThat(got).extracting(m -> m.payload().get("op").asText() + " " + m.payload().get("after").get("amount")
          + " " + m.payload().get("after").get("at").asText())
          .containsExactly("r 42.00 2026-10-03T06:14:39.365472+00:00", "c 7.50 2026-10-03T07:00:00+00:00");
      queen.connectors().delete("plain-src");
    }
  }

  @Test
  void parametersOfThePoolsUrlThatTheSourceSetsItselfDoNotReachItsConnections(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table url_rows (id bigint primary key, v bytea)");
    HikariConfig c = new HikariConfig();
    c.setJdbcUrl(db.jdbcUrl() + (db.jdbcUrl().contains("?") ? "&" : "?") + "ApplicationName=shop"
        + "&preferQueryMode=extendedCacheEverything&binaryTransfer=true&tcpKeepAlive=false&socketTimeout=1");
    c.setUsername(db.user());
    c.setPassword(db.password());
    c.setMaximumPoolSize(8);
    try (HikariDataSource pool = new HikariDataSource(c);
        Queen queen = EmbeddedQueen.builder().dataSource(pool)
            .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("url-src", SourceFixture.sourceDoc("public.url_rows", "urlq", ""));
      await().atMost(Duration.ofSeconds(30)).until(() -> status(queen, "url-src").phase().equals("streaming"));
      // the walsender carries the source's own name, by which a takeover finds an earlier owner's stale walsender
      assertThat(f.rows("select count(*) from pg_stat_activity where backend_type = 'walsender'"
          + " and application_name = 'queen-source-url-src'")).containsExactly("1");
      Thread.sleep(1_500); // a socketTimeout of 1 s from the URL would break the quiet stream by now
      f.sql("insert into url_rows values (1, '\\x00ff')");
      assertThat(drain(queen, "urlq", 1)).extracting(m -> m.payload().get("after").get("v").asText())
          .containsExactly("\\x00ff");
      assertThat(status(queen, "url-src").phase()).isEqualTo("streaming");
      queen.connectors().delete("url-src");
    }
  }

  private static List<Message> drain(Queen queen, String queue, int n) {
    List<Message> got = new ArrayList<>();
    await().atMost(Duration.ofSeconds(20)).until(() -> {
      got.addAll(queen.queue(queue).consumer().batch(10).partitions(10).autoAck(true).pop());
      return got.size() >= n;
    });
    got.sort(java.util.Comparator.comparing(m -> m.payload().get("key").toString()));
    return got;
  }
}
