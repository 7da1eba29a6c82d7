package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.config.NamingConvention;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The sink metrics as Micrometer meters, tag {@code connector}. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SinkMetersTest {
  static final String DOC = """
      {"kind": "sink", "sink": {"queue": "metered", "mode": "sql",
       "statement": "UPDATE m_accounts SET balance = balance + $1::numeric WHERE id = $2::bigint",
       "params": ["$.amount", "$.accountId"]}}""";

  private static double count(SimpleMeterRegistry r, String name) {
    return r.get(name).tag("connector", "metered").counter().count();
  }

  @Test
  void countersFollowTheSinkAcrossARestartAndTheOwnerGaugeGoesWithTheConnector(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("CREATE TABLE m_accounts (id bigint PRIMARY KEY, balance numeric NOT NULL)");
      st.execute("INSERT INTO m_accounts VALUES (1, 0), (2, 0)");
    }
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).meterRegistry(registry)
        .meterTags("queen.db", "main")
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("metered", DOC);
      List<PushItem> items = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        items.add(PushItem.to("metered", "a" + (i % 2 + 1), Map.of("amount", "1.5", "accountId", i % 2 + 1)));
      }
      queen.push(items);
      await().atMost(20, TimeUnit.SECONDS).until(() -> registry.find("queen.pg.sink.applied").counter() != null
          && count(registry, "queen.pg.sink.applied") == 10);
      assertThat(count(registry, "queen.pg.sink.skipped")).isZero();
      assertThat(count(registry, "queen.pg.sink.dlq")).isZero();
      assertThat(count(registry, "queen.pg.sink.batches")).isPositive();
      assertThat(count(registry, "queen.pg.connector.errors")).isZero();
      assertThat(registry.get("queen.pg.connector.owner").tag("connector", "metered").gauge().value()).isEqualTo(1.0);
      // the builder's meterTags reach the connectors' meters too
      assertThat(registry.getMeters()).allSatisfy(m -> assertThat(m.getId().getTag("queen.db")).isEqualTo("main"));
      assertThat(queen.status().connector("metered")).as("the connectors in status()").satisfies(s -> {
        assertThat(s.phase()).isEqualTo("running");
        assertThat(s.counters()).containsEntry("applied", 10L);
      });

      // a new version of the document restarts the sink: the same series go on counting (10 redeliveries skipped)
      queen.queue("metered").group("pg-metered").seekToBeginning();
      queen.connectors().put("metered", DOC.replace("\"mode\": \"sql\"", "\"mode\": \"sql\", \"workers\": 2"));
      await().atMost(20, TimeUnit.SECONDS).until(() -> count(registry, "queen.pg.sink.skipped") == 10);
      assertThat(count(registry, "queen.pg.sink.applied")).isEqualTo(10);

      queen.connectors().delete("metered");
      assertThat(queen.status().connectors()).isEmpty();
      assertThat(registry.find("queen.pg.connector.owner").gauge()).as("the gauge goes with the connector").isNull();
      // its counters go too: sinks put and deleted under new names must not grow the registry for the node's life
      assertThat(registry.getMeters()).extracting(m -> m.getId().getName()).filteredOn(n -> n.startsWith("queen.pg"))
          .isEmpty();
      // Micrometer's Prometheus naming is snake case plus _total for counters: queen_pg_sink_applied_total
      assertThat(NamingConvention.snakeCase.name("queen.pg.sink.applied", Meter.Type.COUNTER))
          .isEqualTo("queen_pg_sink_applied");
      assertThat(NamingConvention.snakeCase.name("queen.pg.connector.owner", Meter.Type.GAUGE))
          .isEqualTo("queen_pg_connector_owner");
    }
  }

  /**
   * A registry that refuses every meter: the core turns its metrics off (MetricsTest), and the sinks must still run.
   * The connector meters were registered straight into it, so every re-read failed and no sink started (found in
   * review).
   */
  @Test
  void aRegistryThatRefusesEveryMeterDoesNotKeepASinkFromRunning(TestDatabase db) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    registry.config().meterFilter(new io.micrometer.core.instrument.config.MeterFilter() {
      @Override
      public Meter.Id map(Meter.Id id) {
        throw new IllegalStateException("a registry that refuses every meter");
      }
    });
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("create table refused_meters (id bigint primary key, v int)");
    }
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).meterRegistry(registry)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
      queen.connectors().put("rm", """
          {"kind": "sink", "sink": {"queue": "rmq", "table": "public.refused_meters", "mode": "upsert"}}""");
      queen.push(List.of(PushItem.to("rmq", "1", Map.of("id", 1, "v", 1))));
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        try (Connection c = db.connection(); Statement st = c.createStatement();
            java.sql.ResultSet rs = st.executeQuery("select count(*) from refused_meters")) {
          rs.next();
          return rs.getLong(1) == 1;
        }
      });
      assertThat(queen.connectors().status("rm").orElseThrow().phase()).isEqualTo("running");
      assertThat(queen.connectors().delete("rm")).isTrue(); // the class's database is shared by its tests
    }
  }
}
