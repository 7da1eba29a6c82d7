package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.util.HashSet;
import java.util.Set;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

@QueenPostgres
class NodeIdentityTest {

  @Test
  void defaultNodeIdsAreDistinct(DataSource ds) {
    Set<String> ids = new HashSet<>();
    for (int i = 0; i < 100_000; i++) {
      ids.add(EmbeddedQueen.builder().dataSource(ds).build().nodeId());
    }
    assertThat(ids).hasSize(100_000);
    assertThat(ids).allMatch(id -> id.matches("n[0-9a-f]{16}"));
  }

  @Test
  void theVersionIsKnownAtRunTime(DataSource ds) {
    assertThat(Queen.version()).matches("\\d+\\.\\d+\\.\\d+.*");
    try (Queen q = EmbeddedQueen.builder().dataSource(ds).start()) {
      assertThat(q.nodeId()).matches("n[0-9a-f]{16}");
    }
  }
}
