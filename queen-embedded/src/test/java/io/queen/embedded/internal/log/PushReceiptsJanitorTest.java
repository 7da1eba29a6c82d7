package io.queen.embedded.internal.log;

import com.zaxxer.hikari.HikariDataSource;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.internal.QueenImpl;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The janitor's removal of push receipts: receipts whose run was made more than the node's
 * {@code pushReceiptRetention} ago (24 h unless set) go, in chunks through the primary key; younger ones stay; the ids'
 * layout gives the run and the rank.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PushReceiptsJanitorTest {
  private static final String S = "receipts";
  private static final long DAY = EmbeddedQueen.DEFAULT_PUSH_RECEIPT_RETENTION.toMillis();

  @Test
  void receiptsOlderThanTheirRetentionAreRemovedAndYoungerOnesKept(TestDatabase db) throws Exception {
    try (HikariDataSource pool = db.newDataSource(4);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(S).janitor(false).listen(false).start()) {
      queen.queue("q").partition("p").push(java.util.Map.of("seq", 0));
      queen.queue("q").partition("p").pushAll(List.of(java.util.Map.of("seq", 1), java.util.Map.of("seq", 2)));
      long now = System.currentTimeMillis();
      List<UUID> old = new ArrayList<>();
      try (Connection c = pool.getConnection();
          PreparedStatement st = c.prepareStatement("insert into " + S + ".push_receipts values (?, 1, 0)")) {
        for (int i = 0; i < PushReceipts.RECEIPT_CHUNK + 5; i++) { // more than one chunk
          UUID id = new UUID(((now - DAY - 60_000 - i) << 16) | 0x7000L, 0x8000000000000000L);
          old.add(id);
          st.setObject(1, id);
          st.addBatch();
        }
        st.setObject(1, new UUID(((now - DAY + 60_000) << 16) | 0x7000L, 0x8000000000000000L));
        st.addBatch();
        st.executeBatch();
      }
      assertThat(count(pool)).isEqualTo(PushReceipts.RECEIPT_CHUNK + 5 + 2);

      assertThat(PushReceipts.forgetOldReceipts(pool, "\"" + S + "\"", EmbeddedQueen.DEFAULT_PUSH_RECEIPT_RETENTION, 100))
          .isEqualTo(PushReceipts.RECEIPT_CHUNK + 5);
      assertThat(count(pool)).as("the push's receipt and the one a minute short of the retention").isEqualTo(2);
      assertThat(PushReceipts.forgetOldReceipts(pool, "\"" + S + "\"", EmbeddedQueen.DEFAULT_PUSH_RECEIPT_RETENTION, 100))
          .isZero();
    }
  }

  @Test
  void aJanitorPassReportsWhatItRemovedAndWhatIsLeft(TestDatabase db) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    String schema = S + "_meters";
    try (HikariDataSource pool = db.newDataSource(4);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(schema).janitor(false).listen(false)
            .meterRegistry(registry).start()) {
      QueenImpl node = (QueenImpl) queen;
      node.forgetOldReceipts();
      assertThat(registry.get("queen.push.receipts").gauge().value()).as("none yet").isZero();
      assertThat(registry.get("queen.push.receipts.oldest.age").gauge().value()).isZero();

      queen.queue("q").partition("p").pushAll(List.of(java.util.Map.of("seq", 1), java.util.Map.of("seq", 2)));
      insertReceipts(pool, schema, 24 * 60 + 5, 24 * 60 + 1, 60);
      node.forgetOldReceipts();
      assertThat(registry.get("queen.push.receipts.removed").counter().count()).isEqualTo(2);
      assertThat(registry.get("queen.push.receipts").gauge().value()).as("an estimate, at least one")
          .isGreaterThanOrEqualTo(1);
      assertThat(registry.get("queen.push.receipts.oldest.age").gauge().value())
          .as("the receipt of an hour ago is the oldest left").isBetween(3590.0, 3700.0);
    }
  }

  /** An operator who keeps receipts 30 minutes: this node's janitor removes what is older, and the rest stays. */
  @Test
  void aNodeKeepsReceiptsForItsOwnRetention(TestDatabase db) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    String schema = S + "_short";
    try (HikariDataSource pool = db.newDataSource(4);
        Queen queen = EmbeddedQueen.builder().dataSource(pool).schema(schema).janitor(false).listen(false)
            .pushReceiptRetention(Duration.ofMinutes(30)).meterRegistry(registry).start()) {
      assertThat(((QueenImpl) queen).config().describe()).contains("pushReceiptRetention=PT30M");
      insertReceipts(pool, schema, 40, 31, 29, 5);
      ((QueenImpl) queen).forgetOldReceipts();
      assertThat(registry.get("queen.push.receipts.removed").counter().count()).isEqualTo(2);
      assertThat(registry.get("queen.push.receipts.oldest.age").gauge().value())
          .as("the receipt of 29 minutes ago is the oldest left").isBetween(29 * 60.0, 30 * 60.0);
    }
  }

  @Test
  void theRetentionIsValidated(TestDatabase db) {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(db.dataSource())
        .pushReceiptRetention(Duration.ofMinutes(5)).start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("pushReceiptRetention must be between 10 min and 30 days, was 5 min");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(db.dataSource())
        .pushReceiptRetention(Duration.ofDays(31)).start())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("pushReceiptRetention must be between 10 min and 30 days, was 31 days");
    assertThatThrownBy(() -> EmbeddedQueen.builder().pushReceiptRetention(null))
        .isInstanceOf(NullPointerException.class).hasMessage("pushReceiptRetention must not be null");
  }

  @Test
  void theIdsOfOnePartitionInOnePushAreOneRun() {
    UUID first = MessageIds.timeOrderedUuid();
    assertThat(MessageIds.rank(first)).isZero();
    assertThat(first.version()).isEqualTo(7);
    assertThat(first.variant()).isEqualTo(2);
    UUID fifth = new UUID(first.getMostSignificantBits(), first.getLeastSignificantBits() + 4);
    assertThat(MessageIds.anchor(fifth)).isEqualTo(first);
    assertThat(MessageIds.rank(fifth)).isEqualTo(4);
    assertThat(MessageIds.generatedForm(fifth.toString())).isEqualTo(fifth);
    assertThat(MessageIds.generatedForm(fifth.toString().toUpperCase())).isNull();
    assertThat(MessageIds.generatedForm("t-1")).isNull();
    assertThat(MessageIds.generatedForm(UUID.randomUUID().toString())).isNull(); // version 4
    UUID next = MessageIds.timeOrderedUuid();
    assertThat(next.toString()).isGreaterThan(new UUID(first.getMostSignificantBits(),
        first.getLeastSignificantBits() | ((1L << MessageIds.RANK_BITS) - 1)).toString());
  }

  /** Receipts of runs made {@code ageMinutes} ago (one each), as a push would have written them. */
  private static void insertReceipts(HikariDataSource pool, String schema, long... ageMinutes) throws Exception {
    long now = System.currentTimeMillis();
    try (Connection c = pool.getConnection();
        PreparedStatement st = c.prepareStatement("insert into " + schema + ".push_receipts values (?, 1, 0)")) {
      for (long age : ageMinutes) {
        st.setObject(1, new UUID(((now - age * 60_000) << 16) | 0x7000L, 0x8000000000000000L));
        st.addBatch();
      }
      st.executeBatch();
    }
  }

  private static long count(HikariDataSource pool) throws Exception {
    try (Connection c = pool.getConnection();
        ResultSet rs = c.createStatement().executeQuery("select count(*) from " + S + ".push_receipts")) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
