package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.KvEntry;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.ChildJvm;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A big transaction pushed in pieces, its owner (a node in a JVM of its own) killed part way: the next owner re-reads the transaction from its
 * start and must skip the pieces the pointer covers without moving the pointer back. It once handed each covered
 * piece's pointer over (count 1, 2, ... below the crash's), so every later piece was pushed again and only the
 * transaction-id check in Queen kept the copies out (not once retention had removed the first ones).
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SourceBigTransactionReplayTest {
  private final List<Queen> nodes = new ArrayList<>();
  private ChildJvm child;

  @AfterEach
  void stop() {
    if (child != null) {
      child.close();
    }
    for (int i = nodes.size() - 1; i >= 0; i--) {
      nodes.get(i).close();
    }
  }

  private Queen node(TestDatabase db, String id) {
    Queen q = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId(id)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)).sourceLeaseTtl(Duration.ofSeconds(1)))
        .start();
    nodes.add(q);
    return q;
  }

  private static JsonNode pointer(Queen q) {
    KvEntry e = q.kv().get("queen-pg", "source/big-src/pointer");
    return e.found() ? e.value() : null;
  }

  @Test
  void theNextOwnerSkipsThePiecesThePointerCoversAndNeverMovesItBack(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table bigt (id bigint primary key, note text)");
    Queen observer = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("observer")
        .connectors(ConnectorOptions.defaults().run(false))
        .start();
    nodes.add(observer);
    observer.connectors().put("big-src", SourceFixture.sourceDoc("public.bigt", "bigq", "\"maxBundleMessages\": 1"));
    child = SourceNodeChild.start(db, "big-a", Duration.ofSeconds(1));
    SourceNodeChild.awaitStatus(child, "big-src", "streaming big-a", Duration.ofSeconds(30));

    int rows = 1500;
    f.sql("insert into bigt select g, 'n' || g from generate_series(1, " + rows + ") g");
    await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(5)).until(() -> {
      JsonNode p = pointer(observer);
      return p != null && !p.path("complete").asBoolean(true) && p.path("count").asInt() >= 100;
    });
    SourceNodeChild.crash(db, child, "big-a");
    JsonNode atCrash = pointer(observer);
    assertThat(atCrash.path("complete").asBoolean(true)).as("killed part way through the transaction").isFalse();
    int covered = atCrash.path("count").asInt();
    String lsn = atCrash.path("lsn").asText();

    Queen b = node(db, "big-b");
    int least = Integer.MAX_VALUE;
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < until) {
      JsonNode p = pointer(observer);
      if (!p.path("lsn").asText().equals(lsn) || p.path("complete").asBoolean(true)) {
        break;
      }
      least = Math.min(least, p.path("count").asInt());
      Thread.sleep(2);
    }
    JsonNode done = pointer(observer);
    assertThat(done.path("lsn").asText()).isEqualTo(lsn);
    assertThat(done.path("complete").asBoolean(false)).as("the transaction was finished by the next owner").isTrue();
    assertThat(least).as("the pointer never went back within the transaction").isGreaterThanOrEqualTo(covered);
    assertThat(SourceFixture.status(b, "big-src").messages()).as("the next owner pushed only what was left")
        .isEqualTo(rows - covered);
    SourceFixture.Reader reader = new SourceFixture.Reader("check").drain(observer, "bigq");
    assertThat(reader.total).isEqualTo(rows);
    assertThat(reader.duplicateIds).isZero();
  }
}
