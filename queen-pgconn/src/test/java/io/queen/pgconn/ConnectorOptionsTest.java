package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.spi.ConnectorSettings;
import io.queen.pgconn.internal.PgConnProvider;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The module's own node options: given through the builder's generic hook, checked with the node's other options. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ConnectorOptionsTest {

  @Test
  void theBuilderReportsTheModulesProblemsWithItsOwn() {
    assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://x/y", "u", "p").poolSize(1)
        .connectors(ConnectorOptions.defaults().threads(0).refresh(Duration.ofMillis(5))
            .sourceLeaseTtl(Duration.ofMinutes(11))).start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("4 invalid options")
        .hasMessageContaining("poolSize must be 2..200, was 1")
        .hasMessageContaining("ConnectorOptions.threads must be 1..64, was 0")
        .hasMessageContaining("ConnectorOptions.refresh must be between 100 ms and 10 min, was 5 ms")
        .hasMessageContaining("ConnectorOptions.sourceLeaseTtl must be between 1 s and 10 min, was 11 min");
  }

  @Test
  void theStartUpLineShowsTheOptionsOrOff() {
    assertThat(ConnectorOptions.defaults().describe()).isEqualTo("2 thread(s), re-read every PT5S, source lease PT10S");
    assertThat(ConnectorOptions.defaults().threads(3).refresh(Duration.ofMillis(200)).describe())
        .isEqualTo("3 thread(s), re-read every PT0.2S, source lease PT10S");
    assertThat(ConnectorOptions.defaults().run(false).describe()).isEqualTo("off");
    assertThat(ConnectorOptions.defaults().problems()).isEmpty();
  }

  @Test
  void aNodeGivenNoOptionsRunsTheDefaultsAndOneGivenAnotherModulesIsRefused() {
    PgConnProvider provider = new PgConnProvider();
    assertThat(provider.settings(null).describe()).isEqualTo(ConnectorOptions.defaults().describe());
    ConnectorOptions given = ConnectorOptions.defaults().run(false);
    assertThat(provider.settings(given)).isSameAs(given);
    ConnectorSettings foreign = new ConnectorSettings() {
      @Override
      public List<String> problems() {
        return List.of();
      }

      @Override
      public String describe() {
        return "foreign";
      }
    };
    assertThatThrownBy(() -> provider.settings(foreign)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("queen-pgconn reads io.queen.pgconn.ConnectorOptions");
  }

  @Test
  void aNodeThatRunsNoConnectorsStillServesTheRegistry(TestDatabase db) {
    try (Queen q = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      q.connectors().put("held", PgConnectors.sink("held").queue("held").table("public.held")
          .mode(PgConnectors.SinkMode.APPEND).toJson());
      assertThat(q.connectors().status("held")).get().extracting(s -> s.phase()).isEqualTo("disabled");
      q.connectors().delete("held");
    }
  }
}
