package io.queen.pgconn;

import static io.queen.pgconn.SourceFixture.awaitPhase;
import static io.queen.pgconn.SourceFixture.status;
import static org.assertj.core.api.Assertions.assertThat;

import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The source needs PostgreSQL 17 or later. On an older server a source document is stored, its status says why it
 * cannot run ({@code server_version}, with the server's version), and deleting it reads the slot catalog of that
 * version without an error: no slot exists, and no warning sends the operator to drop one by hand.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 10, max = 16)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SourceOnOldServerTest {

  @Test
  void aSourceIsRefusedWithTheServersVersionAndDeletedWithoutAFalseWarning(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table old_items (id bigint primary key, v text)");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("old-src", SourceFixture.sourceDoc("public.old_items", "old_items", ""));
      awaitPhase(queen, "old-src", "error", Duration.ofSeconds(20));
      ConnectorStatus s = status(queen, "old-src");
      assertThat(s.errorCode()).isEqualTo("server_version");
      assertThat(s.error()).contains("PostgreSQL 17 or later").contains("server_version_num 1");

      try (LogCapture logs = LogCapture.start()) {
        assertThat(queen.connectors().delete("old-src")).isTrue();
        // the delete drops the source's slot and publication before it returns
        assertThat(queen.connectors().list()).isEmpty();
        assertThat(logs.linesWith("WARN")).isEmpty();
        assertThat(logs.linesWith("does not exist")).isEmpty();
      }
      assertThat(f.count("select count(*) from pg_replication_slots")).isZero();
      assertThat(f.count("select count(*) from pg_publication")).isZero();
    }
  }
}
