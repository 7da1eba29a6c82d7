package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.embedded.internal.config.QueenConfig;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The node's configuration as its parts, and the start-up line they make: every setting, no secret. */
class ConfigDescribeTest {
  private static final String KEY = "ab".repeat(32);

  @Test
  void theStartUpLineNamesEverySettingAndMasksThePasswordAndTheKey() {
    QueenConfig c = EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://db:5432/app?password=hunter2&ssl=true", "u",
        "hunter2").poolSize(7).nodeId("n-1").encryptionKey(KEY).adoptEncryptionKey().meterTags("queen.db", "main")
        .sessionTimeout(Duration.ofSeconds(10)).removeEmptyPartitionsAfter(Duration.ZERO).build();
    assertThat(c.describe())
        .startsWith("schema=queen, node=n-1, pool=own HikariCP(7) jdbc:postgresql://db:5432/app?password=****&ssl=true,"
            + " pollInterval=PT0.5S, closeGrace=PT10S, listen=true, janitor=true, kvMaxReadBytes=4194304,"
            + " metrics=false tagged [queen.db, main], maxPayloadBytes=8388608, connectTimeout=PT5S,"
            + " sessionTimeout=PT10S (heartbeat every PT2S), pushReceiptRetention=PT24H,"
            + " removeEmptyPartitionsAfter=never, horizonWarnAfter=PT1M, encryptionKey=set (adopt), connectors=none,"
            + " http=off")
        .doesNotContain("hunter2").doesNotContain("abab");
    assertThat(c.toString()).doesNotContain("hunter2").doesNotContain("abab");
    assertThat(c.connection().toString()).contains("password=****").doesNotContain("hunter2");
    assertThat(c.encryption().toString()).isEqualTo("EncryptionConfig[key=set (adopt), oldKeys=0]");
  }

  @Test
  void eachPartHoldsItsOwnSettings() {
    QueenConfig c = EmbeddedQueen.builder().jdbcUrl("jdbc:postgresql://x/y", "u", "p").schema("s1").nodeId("n-2")
        .sessionTimeout(Duration.ofSeconds(5)).pollInterval(Duration.ofMillis(50)).listen(false).janitor(false)
        .maxPayloadBytes(4096).groupIdleExpiry(Duration.ZERO).encryptionKey(null).build();
    assertThat(c.connection().schema()).isEqualTo("s1");
    assertThat(c.connection().dataSource()).isNull();
    assertThat(c.node().nodeId()).isEqualTo("n-2");
    assertThat(c.node().heartbeatInterval()).isEqualTo(Duration.ofSeconds(1));
    assertThat(c.node().pollInterval()).isEqualTo(Duration.ofMillis(50));
    assertThat(c.node().listen()).isFalse();
    assertThat(c.housekeeping().janitor()).isFalse();
    assertThat(c.housekeeping().groupIdleExpiry()).isZero();
    assertThat(c.payload().maxPayloadBytes()).isEqualTo(4096);
    assertThat(c.encryption().key()).isNull();
    assertThat(c.encryption().describe()).isEqualTo("none");
    assertThat(c.metrics().registry()).isNull();
    assertThat(c.connectors()).isNull();
  }
}
