package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * R4: a source whose table sees no change while another table of the same database is busy does not pin WAL: its
 * slot's {@code confirmed_flush_lsn} keeps moving, and never beyond the pointer (the pointer moves first).
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SourceIdleAdvanceTest {

  @Test
  void aQuietTableInABusyDatabaseDoesNotPinWal(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table quiet (id bigint primary key)", "create table busy (id bigserial primary key, v text)");
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("quiet-src", SourceFixture.sourceDoc("public.quiet", "quiet", ""));
      SourceFixture.awaitPhase(queen, "quiet-src", "streaming", Duration.ofSeconds(20));
      long start = SourceStreamTest.parseLsn(f.text("select confirmed_flush_lsn from pg_replication_slots"
          + " where slot_name = 'queen_quiet_src'"));
      List<Long> confirmed = new ArrayList<>();
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(14);
      while (System.nanoTime() < end) {
        f.sql("insert into busy (v) select 'x' from generate_series(1, 200)");
        // the slot first, then the pointer: a pointer read later is never behind what the slot confirmed before
        long slot = SourceStreamTest.parseLsn(f.text("select confirmed_flush_lsn from pg_replication_slots"
            + " where slot_name = 'queen_quiet_src'"));
        ConnectorStatus s = queen.connectors().status("quiet-src").orElseThrow();
        long pointerFlush = SourceStreamTest.parseLsn(s.pointer().get("flush").asText());
        assertThat(Long.compareUnsigned(pointerFlush, slot)).as("the pointer moves first").isGreaterThanOrEqualTo(0);
        if (confirmed.isEmpty() || confirmed.get(confirmed.size() - 1) != slot) {
          confirmed.add(slot);
        }
        Thread.sleep(100);
      }
      assertThat(confirmed.get(confirmed.size() - 1)).as("confirmed_flush_lsn moved").isGreaterThan(start);
      assertThat(confirmed).as("and kept moving").hasSizeGreaterThanOrEqualTo(3);
      assertThat(queen.connectors().status("quiet-src").orElseThrow().messages()).isZero();
    }
  }
}
