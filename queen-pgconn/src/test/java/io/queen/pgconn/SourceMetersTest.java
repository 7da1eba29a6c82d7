package io.queen.pgconn;

import static io.queen.pgconn.SourceFixture.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The source's meters after a known number of transactions, on the owner and on a standby: transactions, messages,
 * bundles, the pointer and slot gauges, the time lag, and the owner gauge (1 on the owner, 0 elsewhere).
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourceMetersTest {
  static double counter(SimpleMeterRegistry r, String name) {
    var c = r.find(name).tag("connector", "metered-src").counter();
    return c == null ? 0 : c.count();
  }

  static double gauge(SimpleMeterRegistry r, String name) {
    return r.get(name).tag("connector", "metered-src").gauge().value();
  }

  @Test
  void countersAndGaugesAfterAKnownNumberOfTransactions(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    f.sql("create table metered (id bigint primary key, v text)", "create table other (id bigserial primary key, v text)");
    Map<String, SimpleMeterRegistry> registries = Map.of("m1", new SimpleMeterRegistry(), "m2", new SimpleMeterRegistry());
    ConnectorOptions fast = ConnectorOptions.defaults().refresh(Duration.ofMillis(200))
        .sourceLeaseTtl(Duration.ofSeconds(3));
    try (Queen m1 = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("m1").meterRegistry(registries.get("m1"))
        .connectors(fast).start();
        Queen m2 = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("m2").meterRegistry(registries.get("m2"))
            .connectors(fast).start()) {
      m1.connectors().put("metered-src", SourceFixture.sourceDoc("public.metered", "metered", ""));
      await().atMost(Duration.ofSeconds(20)).until(() -> status(m1, "metered-src").phase().equals("streaming")
          || status(m2, "metered-src").phase().equals("streaming"));
      String owner = status(m1, "metered-src").phase().equals("streaming") ? "m1" : "m2";
      Queen own = owner.equals("m1") ? m1 : m2;
      SimpleMeterRegistry r = registries.get(owner);
      SimpleMeterRegistry standby = registries.get(owner.equals("m1") ? "m2" : "m1");

      // five transactions of 1..5 rows, each waited for: five bundles, fifteen messages
      int id = 0;
      long committedAt = 0;
      for (int tx = 1; tx <= 5; tx++) {
        StringBuilder values = new StringBuilder();
        for (int k = 0; k < tx; k++) {
          values.append(k == 0 ? "" : ", ").append("(").append(++id).append(", 'v')");
        }
        f.sql("insert into metered values " + values);
        committedAt = System.currentTimeMillis();
        int expected = id;
        await().atMost(Duration.ofSeconds(10)).until(() -> counter(r, "queen.pg.source.messages") == expected);
      }
      assertThat(counter(r, "queen.pg.source.transactions")).isEqualTo(5);
      assertThat(counter(r, "queen.pg.source.messages")).isEqualTo(15);
      assertThat(counter(r, "queen.pg.source.bundles")).isEqualTo(5);
      assertThat(counter(r, "queen.pg.connector.errors")).isZero();
      double lag = gauge(r, "queen.pg.source.lag.seconds");
      assertThat(lag).isGreaterThanOrEqualTo(0).isLessThan((System.currentTimeMillis() - committedAt) / 1000.0 + 1);
      assertThat(gauge(r, "queen.pg.connector.owner")).isEqualTo(1.0);
      assertThat(gauge(standby, "queen.pg.connector.owner")).isEqualTo(0.0);
      assertThat(counter(standby, "queen.pg.source.messages")).isZero();
      await().atMost(Duration.ofSeconds(10)).until(() -> (long) gauge(r, "queen.pg.source.pointer.lsn")
          == SourceStreamTest.parseLsn(status(own, "metered-src").pointerLsn()));

      // changes elsewhere in the database: the idle advance moves the pointer, but pushes no bundle of messages
      long before = (long) gauge(r, "queen.pg.source.pointer.lsn");
      f.sql("insert into other (v) select 'x' from generate_series(1, 1000)");
      await().atMost(Duration.ofSeconds(20)).until(() -> (long) gauge(r, "queen.pg.source.pointer.lsn") > before);
      assertThat(counter(r, "queen.pg.source.bundles")).as("an idle advance is not a bundle").isEqualTo(5);
      assertThat(counter(r, "queen.pg.source.transactions")).isEqualTo(5);
      // the slot's lag (WAL end minus confirmed_flush_lsn), measured about every 10 s: small once confirmed
      await().atMost(Duration.ofSeconds(25)).until(() -> gauge(r, "queen.pg.source.slot.lag.bytes") > 0
          && gauge(r, "queen.pg.source.slot.lag.bytes") < 1 << 20);
      // a standby does not read the slot: its lag gauges say they do not know, rather than 0, which looks healthy
      assertThat(gauge(standby, "queen.pg.source.slot.lag.bytes")).isNaN();
      assertThat(gauge(standby, "queen.pg.source.lag.seconds")).isNaN();

      // the slot dropped by hand: the source stops (slot_lost) and the owner's gauges stop showing the last reading
      f.dropSlotByHand("queen_metered_src");
      await().atMost(Duration.ofSeconds(20)).until(() -> "slot_lost".equals(status(own, "metered-src").errorCode()));
      assertThat(gauge(r, "queen.pg.source.slot.lag.bytes")).isNaN();
      assertThat(gauge(r, "queen.pg.source.lag.seconds")).isNaN();
      assertThat(gauge(standby, "queen.pg.source.slot.lag.bytes")).isNaN();

      // deleted on the owner: its meters, counters too, leave both registries (the deleting node's at once, the
      // other's at its re-read), so sources put and deleted under new names do not grow them
      own.connectors().delete("metered-src");
      assertThat(r.find("queen.pg.source.lag.seconds").tag("connector", "metered-src").gauge()).isNull();
      assertThat(r.find("queen.pg.source.slot.lag.bytes").tag("connector", "metered-src").gauge()).isNull();
      assertThat(r.getMeters()).noneMatch(m -> "metered-src".equals(m.getId().getTag("connector")));
      await().atMost(Duration.ofSeconds(10)).until(() -> standby.getMeters().stream()
          .noneMatch(m -> "metered-src".equals(m.getId().getTag("connector"))));
    }
  }
}
