package io.queen.embedded.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.KvReason;
import io.queen.KvWriteResult;
import io.queen.embedded.internal.kv.KvWrite;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * A bundle's consecutive writes run in one call, and its put-if-absent writes are created by one multi-row insert;
 * these tests hold that to the one-write-at-a-time rules.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvWriteManyTest {
  private static final KvOptions HOUR = Kv.ttl(Duration.ofHours(1));
  private KvFixture fx;
  private String ns;

  @BeforeEach
  void start(DataSource ds, TestInfo info) {
    fx = new KvFixture(ds);
    ns = "wm." + info.getTestMethod().orElseThrow().getName();
  }

  private List<KvWriteResult> writeMany(KvWrite... writes) throws SQLException {
    try (Connection c = fx.ds.getConnection()) {
      return fx.store.writeMany(c, List.of(writes));
    }
  }

  @Test
  void putIfAbsentWritesTakenTogetherAnswerInOrderAsOneByOne() throws SQLException {
    fx.kv.put(ns, "live", "old", HOUR);
    long expiredVersion = fx.kv.put(ns, "expired", "old", HOUR).version();
    fx.expire(ns, "expired");
    List<KvWriteResult> res = writeMany(
        fx.store.preparePutIfAbsent(ns, "new", "a", HOUR),
        fx.store.preparePutIfAbsent(ns, "live", "b", HOUR),
        fx.store.preparePutIfAbsent(ns, "expired", "c", Kv.forever()),
        fx.store.prepareIncr(ns, "counter", 5, HOUR));
    assertThat(res).extracting(KvWriteResult::key).containsExactly("new", "live", "expired", "counter");
    assertThat(res).extracting(KvWriteResult::applied).containsExactly(true, false, true, true);
    assertThat(res.get(0).version()).isEqualTo(fx.kv.get(ns, "new").version()).isPositive();
    assertThat(res.get(0).value().asText()).isEqualTo("a");
    assertThat(res.get(0).expiresAt()).isEqualTo(fx.kv.get(ns, "new").expiresAt());
    assertThat(res.get(1).reason()).isEqualTo(KvReason.EXISTS);
    assertThat(res.get(1).value().asText()).as("the live value, not ours").isEqualTo("old");
    assertThat(res.get(2).version()).as("a fresh key over the expired row: a new version").isGreaterThan(expiredVersion)
        .isEqualTo(fx.kv.get(ns, "expired").version());
    assertThat(res.get(2).expiresAt()).isNull();
    assertThat(fx.kv.get(ns, "expired").value().asText()).isEqualTo("c");
    assertThat(fx.physicalRows(ns, "expired")).isEqualTo(1);
    assertThat(res.get(3).value().asLong()).isEqualTo(5);
  }

  @Test
  void resultsEndAtTheFirstRequiredWriteThatDidNotApplyAndTheBundleRollsBack() throws SQLException {
    fx.kv.put(ns, "taken", "old", HOUR);
    try (Connection c = fx.ds.getConnection()) {
      c.setAutoCommit(false); // as a bundle runs it: a required write that did not apply rolls everything back
      List<KvWriteResult> res = fx.store.writeMany(c, List.of(
          fx.store.preparePutIfAbsent(ns, "a", "a", HOUR.required()),
          fx.store.preparePutIfAbsent(ns, "taken", "b", HOUR.required()),
          fx.store.preparePutIfAbsent(ns, "c", "c", HOUR.required())));
      assertThat(res).extracting(KvWriteResult::key).containsExactly("a", "taken");
      assertThat(res.get(1).reason()).isEqualTo(KvReason.EXISTS);
      c.rollback();
    }
    assertThat(fx.physicalRows(ns, "a") + fx.physicalRows(ns, "c")).isZero();
    assertThat(fx.kv.get(ns, "taken").value().asText()).isEqualTo("old");
  }

  @Test
  void aPutIfAbsentAfterAnotherWriteRunsInItsTurn() throws SQLException {
    // only the leading run of put-if-absent writes is taken together, so keys are still met in the bundle's order
    long old = fx.kv.put(ns, "x", "old", HOUR).version();
    List<KvWriteResult> res = writeMany(
        fx.store.preparePut(ns, "x", "new", HOUR),
        fx.store.preparePutIfAbsent(ns, "y", "y", HOUR),
        fx.store.preparePutIfAbsent(ns, "x2", "x2", Kv.forever()));
    assertThat(res).extracting(KvWriteResult::applied).containsExactly(true, true, true);
    assertThat(res.get(0).version()).isGreaterThan(old);
    assertThat(res.get(2).expiresAt()).isNull();
    assertThat(fx.kv.get(ns, "y").version()).isEqualTo(res.get(1).version());
  }

  /**
   * Large bundles on one connection, past the five calls after which PL/pgSQL keeps a generic plan: every write's
   * result in its place, whether the insert created its key (kv_write_many finds its ordinal by namespace and key) or an
   * existing row sent it through kv_put, with a put and an increment after the run.
   */
  @Test
  void largeBundlesAnswerEveryWriteInItsPlaceCallAfterCall() throws SQLException {
    for (int k = 0; k < 3000; k += 7) {
      fx.kv.put(ns, "k" + k, "old", HOUR); // every seventh key of the first call exists
    }
    try (Connection c = fx.ds.getConnection()) {
      for (int call = 0; call < 7; call++) {
        List<KvWrite> writes = new ArrayList<>();
        for (int k = 0; k < 3000; k++) {
          writes.add(fx.store.preparePutIfAbsent(ns, (call == 0 ? "k" : "c" + call + "-") + k, "v" + k, HOUR));
        }
        writes.add(fx.store.preparePut(ns, "tail" + call, "1", HOUR));
        writes.add(fx.store.prepareIncr(ns, "count", 1, HOUR));
        List<KvWriteResult> res = fx.store.writeMany(c, writes);
        assertThat(res).hasSize(3002);
        for (int k = 0; k < 3000; k++) {
          KvWriteResult r = res.get(k);
          assertThat(r.key()).isEqualTo((call == 0 ? "k" : "c" + call + "-") + k);
          boolean existed = call == 0 && k % 7 == 0;
          assertThat(r.applied()).as("call %d write %d", call, k).isEqualTo(!existed);
          assertThat(r.value().asText()).as("call %d write %d", call, k).isEqualTo(existed ? "old" : "v" + k);
        }
        assertThat(res.get(3000).applied()).isTrue();
        assertThat(res.get(3001).value().asLong()).isEqualTo(call + 1);
      }
    }
    assertThat(fx.kv.get(ns, "c6-2999").value().asText()).isEqualTo("v2999");
    assertThat(fx.kv.get(ns, "k7").value().asText()).isEqualTo("old");
  }

  @Test
  void theDatabaseRefusesTwoTouchesOfOneKeyInOneCall() throws SQLException {
    try (Connection c = fx.ds.getConnection(); Statement st = c.createStatement()) {
      assertThatThrownBy(() -> st.executeQuery("select * from queen.kv_write_many(array['PUT_IF_ABSENT', 'PUT'],"
          + " array['" + ns + "', '" + ns + "'], array['k', 'k'], array['1', '2'], array[0, 0]::bigint[],"
          + " array[null, null]::bigint[], array[true, true], array[null, null]::bigint[], array[null, null]::bigint[],"
          + " array[false, false])"))
          .isInstanceOfSatisfying(SQLException.class, e -> {
            assertThat(e.getSQLState()).isEqualTo("22023");
            assertThat(e.getMessage()).contains("at most once");
          });
    }
    assertThat(fx.physicalRows(ns, "k")).as("nothing was written").isZero();
  }
}
