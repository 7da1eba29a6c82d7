package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class StartupTest {

  @Test
  void nodesStartingAtOnceMigrateOnceWithoutColliding(DataSource ds) throws Exception {
    int nodes = 4;
    CyclicBarrier barrier = new CyclicBarrier(nodes);
    List<CompletableFuture<Queen>> starts = new ArrayList<>();
    for (int i = 0; i < nodes; i++) {
      String id = "m" + i;
      starts.add(CompletableFuture.supplyAsync(() -> {
        try {
          barrier.await(10, TimeUnit.SECONDS);
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
        return EmbeddedQueen.builder().dataSource(ds).schema("race").nodeId(id).start();
      }));
    }
    List<Queen> started = new ArrayList<>();
    try {
      for (CompletableFuture<Queen> f : starts) {
        started.add(f.get(30, TimeUnit.SECONDS));
      }
      try (Connection c = ds.getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("select count(*), count(distinct version) from race.schema_version")) {
        rs.next();
        assertThat(rs.getInt(1)).isEqualTo(rs.getInt(2)).isGreaterThanOrEqualTo(1);
      }
      started.get(0).queue("q").push(Map.of("ok", true));
      assertThat(started.get(3).queue("q").consumer().pop()).hasSize(1);
    } finally {
      started.forEach(Queen::close);
    }
  }

  @Test
  void everyMigratedFunctionKeepsItsPlannerSettings(DataSource ds) throws Exception {
    // every function file states its settings in its definition: this holds them to what the functions need (index
    // probes always; one plan per session, of nested loops, for the hot four)
    String noJit = "jit=off,max_parallel_workers_per_gather=0";
    try (Queen q = EmbeddedQueen.builder().dataSource(ds).schema("plans").start();
        Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select p.proname, p.pronargs, coalesce(array_to_string(p.proconfig, ','), '')"
            + " from pg_proc p where p.pronamespace = 'plans'::regnamespace order by 1")) {
      Map<String, String> config = new java.util.HashMap<>();
      while (rs.next()) {
        if ("pop".equals(rs.getString(1)) && rs.getInt(2) == 11 || "ack".equals(rs.getString(1)) && rs.getInt(2) == 6) {
          // the pop and ack of the shorter argument lists call the current ones, which carry the settings
          assertThat(rs.getString(3)).as(rs.getString(1) + " of " + rs.getInt(2) + " arguments").isEqualTo(noJit);
          continue;
        }
        config.put(rs.getString(1), rs.getString(3));
      }
      for (String f : List.of("push", "refresh_pending", "retention_step", "kv_put", "kv_incr", "kv_delete", "kv_write_many", "bundle_kv_ack_fenced",
          "shrink_lease")) {
        assertThat(config.get(f)).as(f).isEqualTo("enable_seqscan=off," + noJit);
      }
      for (String f : List.of("push_fast", "push_partition", "ack", "pop")) {
        assertThat(config.get(f)).as(f).isEqualTo(
            "enable_seqscan=off,plan_cache_mode=force_generic_plan,enable_hashjoin=off,enable_mergejoin=off," + noJit);
      }
    }
  }

  @Test
  void noFunctionCanBeJitCompiledOrRunInParallel(DataSource ds) throws Exception {
    // A server with JIT compiles a statement whose estimate passes jit_above_cost on every run (tens of ms): every
    // function that reads tables carries jit=off and max_parallel_workers_per_gather=0, whatever else it sets
    try (Queen q = EmbeddedQueen.builder().dataSource(ds).schema("nojit").start();
        Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select p.oid::regprocedure::text, coalesce(p.proconfig, '{}')"
            + " @> array['jit=off', 'max_parallel_workers_per_gather=0'] from pg_proc p"
            + " where p.pronamespace = 'nojit'::regnamespace and p.provolatile <> 'i' order by 1")) {
      int functions = 0;
      while (rs.next()) {
        functions++;
        assertThat(rs.getBoolean(2)).as(rs.getString(1)).isTrue();
      }
      assertThat(functions).isGreaterThan(20);
    }
  }

  @Test
  void theMessageTableIsVacuumedWithoutCostPauses(DataSource ds) throws Exception {
    // retention's bulk deletes need a vacuum that keeps up (src-test/bench/BENCHMARKS.md, "sustained_push_pop")
    try (Queen q = EmbeddedQueen.builder().dataSource(ds).schema("vac").start();
        Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select array_to_string(reloptions, ',') from pg_class"
            + " where oid = 'vac.messages'::regclass")) {
      rs.next();
      assertThat(rs.getString(1)).isEqualTo("autovacuum_vacuum_cost_delay=0");
    }
  }

  @Test
  void aNodeOnASchemaANewerVersionMigratedSaysSo(DataSource ds) throws Exception {
    String schema = "newer";
    try (Queen first = EmbeddedQueen.builder().dataSource(ds).schema(schema).listen(false).start()) {
      first.queue("q").push(Map.of("i", 1));
    }
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("insert into " + schema + ".schema_version (module, version, name)"
          + " values ('queen', 999, 'V999__from_the_future.sql')");
    }
    try (io.queen.testkit.LogCapture logs = io.queen.testkit.LogCapture.start();
        Queen behind = EmbeddedQueen.builder().dataSource(ds).schema(schema).listen(false).start()) {
      assertThat(logs.linesWith("WARN", "schema " + schema + " is at V999, newer than this node's", "upgrade this one"))
          .hasSize(1);
      assertThat(behind.queue("q").consumer().pop()).hasSize(1);
    }
  }

  @Test
  void schemaIsConfigurableAndIsolated(DataSource ds) {
    try (Queen a = EmbeddedQueen.builder().dataSource(ds).schema("tenant_a").start();
        Queen b = EmbeddedQueen.builder().dataSource(ds).schema("tenant_b").start()) {
      a.queue("same").push(Map.of("from", "a"));
      assertThat(b.queue("same").consumer().pop()).isEmpty();
      assertThat(a.queue("same").consumer().pop()).hasSize(1);
    }
  }

  @Test
  void ownPoolFromJdbcUrlIsOpenedAndClosed(TestDatabase db) {
    Queen q = EmbeddedQueen.builder().jdbcUrl(db.jdbcUrl(), db.user(), db.password()).poolSize(3).schema("own").start();
    q.queue("x").push(Map.of("a", 1));
    assertThat(q.queue("x").consumer().pop()).hasSize(1);
    q.close();
    q.close();
  }

  @Test
  void builderRejectsBadOptionsBeforeStartingAnything(DataSource ds) {
    assertThatThrownBy(() -> EmbeddedQueen.builder().start()).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("dataSource").hasMessageContaining("jdbcUrl");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).jdbcUrl("jdbc:postgresql://x/y", "u", "p").start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("exactly one");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).schema("Bad-Schema").start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("schema");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).nodeId("bad node").start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("nodeId");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).pollInterval(Duration.ofMillis(1)).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pollInterval");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).closeGracePeriod(Duration.ofSeconds(-1)).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("closeGracePeriod");
    assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl("jdbc:mysql://x/y", "u", "p").start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("jdbc:postgresql:");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).kvMaxReadBytes(10).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kvMaxReadBytes");
    // every invalid option at once, durations as the documentation writes them
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).schema("Bad").pollInterval(Duration.ZERO)
        .nodeId("a b").start()).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("3 invalid options: schema 'Bad' is invalid: allowed is [a-z_][a-z0-9_]{0,62}; nodeId 'a b' is"
            + " invalid: allowed is [A-Za-z0-9._-]{1,64}; pollInterval must be between 10 ms and 60 s, was 0 s");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).poolSize(5).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("with dataSource(...) size your own pool");
    // none of these created the default schema
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from pg_namespace where nspname = 'queen'")) {
      rs.next();
      assertThat(rs.getInt(1)).isZero();
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
