package io.queen.pgconn;

import static io.queen.pgconn.SourceFixture.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A node on an application pool at REPEATABLE READ borrows through Queen's READ COMMITTED wrapper: a source without a
 * {@code connection} block must still find the pool's URL and credentials behind it (it failed with
 * replication_connection when the wrapper came in).
 */
@QueenPostgres
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
        Queen queen = EmbeddedQueen.builder().dataSource(pool).connectorRefresh(Duration.ofMillis(200)).start()) {
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
}
