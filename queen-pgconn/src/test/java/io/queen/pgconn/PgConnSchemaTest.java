package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * This module's tables and functions come from its own SQL files (io/queen/pgconn/sql), applied by the node's
 * migrator at start as module "pgconn", beside the core's: before any connector call, and on a node that runs none.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PgConnSchemaTest {

  @Test
  void theNodesMigratorCreatesTheRegistrysTableSequenceAndTrigger(DataSource ds) throws Exception {
    try (Queen q = EmbeddedQueen.builder().dataSource(ds).schema("pgc_schema")
        .connectors(ConnectorOptions.defaults().run(false)).listen(false)
        .start()) {
      assertThat(rows(ds, "select module || ' ' || version || ' ' || name from pgc_schema.schema_version order by 1"))
          .containsExactly("pgconn 1 V1__connectors.sql", "queen 1 V1__baseline.sql");
      assertThat(rows(ds, "select name from pgc_schema.function_version where module = 'pgconn'"))
          .containsExactly("connectors_next_version");
      assertThat(rows(ds, "select tgname from pg_trigger where tgrelid = 'pgc_schema.connectors'::regclass"))
          .containsExactly("connectors_next_version");
      // like the core's, the function runs without JIT or parallel workers
      assertThat(rows(ds, "select array_to_string(proconfig, ',') from pg_proc where proname = 'connectors_next_version'"
          + " and pronamespace = 'pgc_schema'::regnamespace"))
          .containsExactly("jit=off,max_parallel_workers_per_gather=0");
      assertThat(rows(ds, "select count(*) from pgc_schema.connectors")).containsExactly("0");
    }
  }

  private static List<String> rows(DataSource ds, String sql) throws Exception {
    List<String> out = new ArrayList<>();
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }
}
