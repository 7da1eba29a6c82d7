package io.queen.embedded.kv;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Kv;
import io.queen.embedded.internal.kv.KvSweeper;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvSweeperTest {
  private static KvFixture fx;

  @BeforeAll
  static void migrate(DataSource ds) {
    fx = new KvFixture(ds);
  }

  @BeforeEach
  void empty() {
    fx.update("delete from queen.kv");
  }

  private static void insertExpired(String ns, int n) throws Exception {
    try (Connection c = fx.ds.getConnection();
        PreparedStatement st = c.prepareStatement("insert into queen.kv(namespace, key, value, version, expires_at)"
            + " select ?, 'k' || g, 'true', 1, now() - interval '1 minute' from generate_series(1, ?) g")) {
      st.setString(1, ns);
      st.setInt(2, n);
      st.executeUpdate();
    }
  }

  @Test
  void sweeperRemovesExpiredRowsInBatches() throws Exception {
    insertExpired("sweep", 1200);
    fx.kv.put("sweep", "live", 1, Kv.ttl(Duration.ofHours(1)));
    fx.kv.put("sweep", "forever", 1, Kv.forever());
    KvSweeper sweeper = new KvSweeper(fx.ds, KvFixture.SCHEMA, 500, 100);

    try (Connection c = fx.ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(sweeper.sweep(c, 500)).isEqualTo(500);
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(fx.queryLong("select count(*) from queen.kv")).isEqualTo(702);

    assertThat(sweeper.sweepRound()).isEqualTo(700);
    assertThat(fx.queryLong("select count(*) from queen.kv")).isEqualTo(2);
    assertThat(fx.kv.get("sweep", "live").found()).isTrue();
    assertThat(fx.kv.get("sweep", "forever").found()).isTrue();
    assertThat(sweeper.sweepRound()).isZero();
  }

  @Test
  void oneRoundIsBoundedByItsBatches() throws Exception {
    insertExpired("bounded", 50);
    KvSweeper sweeper = new KvSweeper(fx.ds, KvFixture.SCHEMA, 10, 2);
    assertThat(sweeper.sweepRound()).isEqualTo(20);
    assertThat(fx.queryLong("select count(*) from queen.kv")).isEqualTo(30);
  }

  @Test
  void onlyOneNodeSweepsAtATime() throws Exception {
    insertExpired("lock", 10);
    KvSweeper node1 = new KvSweeper(fx.ds, KvFixture.SCHEMA);
    KvSweeper node2 = new KvSweeper(fx.ds, KvFixture.SCHEMA);
    try (Connection c = fx.ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(node1.tryLock(c)).isTrue();
      assertThat(node2.sweepRound()).as("node 2 sees node 1 sweeping and stands back").isEqualTo(-1);
      assertThat(fx.queryLong("select count(*) from queen.kv")).isEqualTo(10);
      try (Connection other = fx.ds.getConnection()) {
        other.setAutoCommit(false);
        assertThat(new KvSweeper(fx.ds, "another_schema").tryLock(other)).as("each schema has its own lock").isTrue();
        other.rollback();
        other.setAutoCommit(true);
      }
      c.rollback();
      c.setAutoCommit(true);
    }
    assertThat(node2.sweepRound()).isEqualTo(10);
  }

  @Test
  void sweeperSkipsRowsAWriterHolds() throws Exception {
    insertExpired("held", 3);
    KvSweeper sweeper = new KvSweeper(fx.ds, KvFixture.SCHEMA);
    try (Connection writer = fx.ds.getConnection()) {
      writer.setAutoCommit(false);
      try (Statement st = writer.createStatement()) {
        st.execute("select * from queen.kv where namespace = 'held' and key = 'k1' for update");
      }
      assertThat(sweeper.sweepRound()).isEqualTo(2);
      writer.rollback();
      writer.setAutoCommit(true);
    }
    assertThat(sweeper.sweepRound()).isEqualTo(1);
  }
}
