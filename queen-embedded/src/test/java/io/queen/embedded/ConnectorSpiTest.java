package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The connector SPI as seen from a node without queen-pgconn on the classpath. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ConnectorSpiTest {

  @Test
  void connectorsWithoutQueenPgconnNameTheDependencyToAdd(DataSource ds) {
    try (Queen q = EmbeddedQueen.builder().dataSource(ds).start()) {
      assertThatThrownBy(q::connectors).isInstanceOf(UnsupportedOperationException.class)
          .hasMessageContaining("io.queen:queen-pgconn").hasMessageContaining("<artifactId>queen-pgconn</artifactId>");
      assertThat(q.status().connectors()).as("no connectors in status() without queen-pgconn").isEmpty();
    }
  }

  @Test
  void encryptionKeyMustBe64HexDigitsAndIsNeverEchoed() {
    String bad = "secretsecretsecret";
    assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://x/y", "u", "p").encryptionKey(bad).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("encryptionKey must be 64 hex digits").hasMessageContaining("was 18 character(s)")
        .hasMessageNotContaining(bad);
    assertThat(EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://x/y", "u", "p").encryptionKey("ab".repeat(32)).build()
        .encryption().key()).hasSize(32);
    assertThat(EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://x/y", "u", "p").encryptionKey("ab".repeat(32)).build()
        .toString()).doesNotContain("abab");
  }

  @Test
  void connectorSettingsWithoutAConnectorModuleAreRefused(DataSource ds) {
    io.queen.embedded.spi.ConnectorSettings settings = new io.queen.embedded.spi.ConnectorSettings() {
      @Override
      public java.util.List<String> problems() {
        return java.util.List.of();
      }

      @Override
      public String describe() {
        return "test";
      }
    };
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).connectors(settings).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no connector module is on the classpath")
        .hasMessageContaining("io.queen:queen-pgconn");
  }

  @Test
  void connectorSettingsProblemsAreReportedWithTheOtherOptions() {
    io.queen.embedded.spi.ConnectorSettings bad = new io.queen.embedded.spi.ConnectorSettings() {
      @Override
      public java.util.List<String> problems() {
        return java.util.List.of("threads must be 1..64, was 0");
      }

      @Override
      public String describe() {
        return "bad";
      }
    };
    assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://x/y", "u", "p").poolSize(1)
        .connectors(bad).build())
        .hasMessageContaining("2 invalid options").hasMessageContaining("poolSize must be 2..200, was 1")
        .hasMessageContaining("threads must be 1..64, was 0");
  }
}
