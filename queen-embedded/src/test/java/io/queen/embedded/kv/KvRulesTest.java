package io.queen.embedded.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.NullNode;
import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvOptions;
import io.queen.KvReason;
import io.queen.KvWriteResult;
import io.queen.testkit.QueenPostgres;
import java.math.BigInteger;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/** One test per KV rule (docs/transactions-and-kv.md), named after the rule. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvRulesTest {
  private static final KvOptions HOUR = Kv.ttl(Duration.ofHours(1));
  private static KvFixture fx;
  private static Kv kv;
  private String ns;

  @BeforeAll
  static void migrate(DataSource ds) {
    fx = new KvFixture(ds);
    kv = fx.kv;
  }

  @BeforeEach
  void namespace(TestInfo info) {
    ns = "t." + info.getTestMethod().orElseThrow().getName();
    if (ns.length() > 128) {
      ns = ns.substring(0, 128);
    }
  }

  // ------------------------------------------------------------------------------------- expiry

  @Test
  void expiredKeyNeverCountsAsExisting() {
    kv.put(ns, "k", "v", HOUR);
    kv.put(ns, "k2", "v2", HOUR);
    fx.expire(ns, "k");
    assertThat(fx.physicalRows(ns, "k")).as("the row is still there: no sweeper ran").isEqualTo(1);

    assertThat(kv.get(ns, "k").found()).isFalse();
    assertThat(kv.getMany(ns, List.of("k", "k2"))).extracting(KvEntry::found).containsExactly(false, true);
    assertThat(kv.getPrefix(ns, "k", null, 100).rows()).extracting(KvEntry::key).containsExactly("k2");
    assertThat(kv.delete(ns, "k").reason()).isEqualTo(KvReason.ABSENT);
    assertThat(kv.put(ns, "k", "x", Kv.forever().expect(1)).reason())
        .as("an expect on the expired version finds nothing").isEqualTo(KvReason.ABSENT);
  }

  @Test
  void putIfAbsentWinsAgainstAnExpiredRowStillThere() {
    long first = kv.put(ns, "marker", "old", HOUR).version();
    long second = kv.put(ns, "marker", "old2", HOUR).version();
    fx.expire(ns, "marker");

    KvWriteResult r = kv.putIfAbsent(ns, "marker", "new", HOUR);
    assertThat(r.applied()).isTrue();
    assertThat(r.value().asText()).isEqualTo("new");
    assertThat(r.version()).as("a key created anew never gets a version of its earlier life").isGreaterThan(second)
        .isNotEqualTo(first);
    assertThat(kv.once(ns, "marker", HOUR).reason()).isEqualTo(KvReason.EXISTS);
  }

  @Test
  void incrSeesAnExpiredCounterAsZeroAndStartsAFreshWindow() {
    KvWriteResult firstWindow = kv.incr(ns, "window", 7, Kv.ttl(Duration.ofMinutes(1)));
    Instant firstExpiry = firstWindow.expiresAt();
    fx.expire(ns, "window");

    KvWriteResult r = kv.incr(ns, "window", 1, Kv.ttl(Duration.ofHours(1)));
    assertThat(r.applied()).isTrue();
    assertThat(r.longValue()).isEqualTo(1);
    assertThat(r.version()).isGreaterThan(firstWindow.version());
    assertThat(r.expiresAt()).isAfter(firstExpiry.plus(Duration.ofMinutes(30)));
  }

  @Test
  void putDoesNotInheritPreviousExpiry() {
    Instant day = kv.put(ns, "k", 1, Kv.ttl(Duration.ofDays(1))).expiresAt();
    assertThat(day).isNotNull();

    KvWriteResult forever = kv.put(ns, "k", 2, Kv.forever());
    assertThat(forever.expiresAt()).as("forever replaces the day").isNull();
    assertThat(kv.get(ns, "k").expiresAt()).isNull();

    KvWriteResult minute = kv.put(ns, "k", 3, Kv.ttl(Duration.ofMinutes(1)));
    assertThat(minute.expiresAt()).isBefore(day.minus(Duration.ofHours(23)));
    KvWriteResult cas = kv.put(ns, "k", 4, Kv.ttl(Duration.ofDays(2)).expect(minute.version()));
    assertThat(cas.expiresAt()).as("a compare-and-set write carries its own expiry too").isAfter(day);
  }

  @Test
  void incrTtlIsCreateOnly() {
    KvWriteResult created = kv.incr(ns, "c", 1, Kv.ttl(Duration.ofMinutes(1)));
    KvWriteResult again = kv.incr(ns, "c", 1, Kv.ttl(Duration.ofDays(7)));
    KvWriteResult forever = kv.incr(ns, "c", 1, Kv.forever());
    assertThat(again.expiresAt()).isEqualTo(created.expiresAt());
    assertThat(forever.expiresAt()).isEqualTo(created.expiresAt());
    assertThat(forever.longValue()).isEqualTo(3);
  }

  @Test
  void exactlyOneExpiryRequired() {
    assertThatThrownBy(() -> Kv.ttl(Duration.ZERO)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Kv.ttl(Duration.ofSeconds(-1))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Kv.ttl(null)).isInstanceOf(NullPointerException.class);
    assertThatThrownBy(() -> kv.put(ns, "k", 1, null)).isInstanceOf(NullPointerException.class)
        .hasMessageStartingWith("options: every write carries exactly one expiry; pass Kv.ttl(duration) or Kv.forever()");

    // the rule lives in SQL, for every caller: neither, both, zero
    String put = "select * from queen.kv_put(?, ?, ?, ?, ?)";
    assertThat(fx.sqlState(put, ns, "k", "1", null, false)).isEqualTo("22023");
    assertThat(fx.sqlState(put, ns, "k", "1", null, null)).isEqualTo("22023");
    assertThat(fx.sqlState(put, ns, "k", "1", 1000L, true)).isEqualTo("22023");
    assertThat(fx.sqlState(put, ns, "k", "1", 0L, false)).isEqualTo("22023");
    assertThat(fx.sqlState("select * from queen.kv_incr(?, ?, 1, null, false)", ns, "c")).isEqualTo("22023");
    assertThat(fx.sqlState("select * from queen.kv_put_if_absent(?, ?, '1', 5, true)", ns, "m")).isEqualTo("22023");
    assertThat(fx.physicalRows(ns, "k") + fx.physicalRows(ns, "c") + fx.physicalRows(ns, "m")).isZero();
    assertThat(fx.sqlState(put, ns, "k", "1", 1000L, false)).isNull();
    assertThat(fx.sqlState(put, ns, "k2", "1", null, true)).isNull();
  }

  @Test
  void expiryIsTakenFromTheDatabaseClock() {
    Instant dbNow = Instant.ofEpochMilli(fx.queryLong("select (extract(epoch from now()) * 1000)::bigint"));
    KvWriteResult r = kv.put(ns, "k", 1, Kv.ttl(Duration.ofHours(2)));
    assertThat(Duration.between(dbNow, r.expiresAt())).isBetween(Duration.ofMinutes(119), Duration.ofMinutes(121));
  }

  // ------------------------------------------------------------------------------ conditional writes

  @Test
  void conditionalWriteThatMatchesNothingCreatesNothing() {
    KvWriteResult put = kv.put(ns, "saga", "compensate", Kv.forever().expect(3));
    assertThat(put.applied()).isFalse();
    assertThat(put.reason()).isEqualTo(KvReason.ABSENT);
    assertThat(put.found()).isFalse();
    assertThat(fx.physicalRows(ns, "saga")).isZero();

    assertThat(kv.delete(ns, "saga", 1).reason()).isEqualTo(KvReason.ABSENT);
    assertThat(fx.physicalRows(ns, "saga")).isZero();

    kv.put(ns, "gone", "v", HOUR);
    fx.expire(ns, "gone");
    assertThat(kv.put(ns, "gone", "revived?", Kv.forever().expect(1)).reason()).isEqualTo(KvReason.ABSENT);
    assertThat(kv.get(ns, "gone").found()).isFalse();
  }

  @Test
  void expectIsACompareAndSetOnTheVersion() {
    KvWriteResult v1 = kv.put(ns, "k", "a", HOUR);
    KvWriteResult v2 = kv.put(ns, "k", "b", HOUR.expect(v1.version()));
    assertThat(v2.applied()).isTrue();
    assertThat(v2.version()).isEqualTo(v1.version() + 1);

    KvWriteResult stale = kv.put(ns, "k", "c", HOUR.expect(v1.version()));
    assertThat(stale.applied()).isFalse();
    assertThat(stale.reason()).isEqualTo(KvReason.VERSION);
    assertThat(kv.get(ns, "k").value().asText()).isEqualTo("b");

    KvWriteResult mustBeAbsent = kv.put(ns, "k", "d", HOUR.expect(0));
    assertThat(mustBeAbsent.reason()).as("expect(0) means absent").isEqualTo(KvReason.EXISTS);
    assertThat(kv.put(ns, "new", "d", HOUR.expect(0)).applied()).isTrue();

    assertThat(kv.delete(ns, "k", v1.version()).reason()).isEqualTo(KvReason.VERSION);
    assertThat(kv.delete(ns, "k", v2.version()).applied()).isTrue();
    assertThat(kv.get(ns, "k").found()).isFalse();
  }

  @Test
  void versionsGrowWithEveryWrite() {
    long v1 = kv.put(ns, "k", 1, HOUR).version();
    long v2 = kv.put(ns, "k", 2, HOUR).version();
    long v3 = kv.incr(ns, "k", 1, HOUR).version();
    assertThat(v1).isPositive();
    assertThat(v2).isGreaterThan(v1);
    assertThat(v3).isGreaterThan(v2);
    assertThat(kv.get(ns, "k").version()).isEqualTo(v3);
  }

  /**
   * ABA: a key deleted (or expired) and written again as many times never comes back to a version of its earlier
   * life, so an expect held from that life fails. With per-key counters that restarted at 1, the third
   * write of the second life would have version 3 again and {@code expect(3)} from the first life would apply.
   */
  @Test
  void aVersionHeldFromAKeysEarlierLifeNeverMatchesItsNextLife() {
    List<Long> firstLife = new java.util.ArrayList<>();
    for (int i = 0; i < 3; i++) {
      firstLife.add(kv.put(ns, "aba", i, HOUR).version());
    }
    assertThat(kv.delete(ns, "aba").applied()).isTrue();
    List<Long> secondLife = new java.util.ArrayList<>();
    secondLife.add(kv.putIfAbsent(ns, "aba", "a", HOUR).version());
    secondLife.add(kv.put(ns, "aba", "b", HOUR).version());
    secondLife.add(kv.incr(ns, "aba-n", 1, HOUR).version()); // another key's write between them
    fx.expire(ns, "aba");
    secondLife.add(kv.incr(ns, "aba", 1, HOUR).version()); // a third life, over the expired row
    secondLife.add(kv.put(ns, "aba", 9, HOUR).version());
    assertThat(secondLife).doesNotContainAnyElementsOf(firstLife).doesNotHaveDuplicates();
    long held = firstLife.get(2);
    KvWriteResult stale = kv.put(ns, "aba", "stale", HOUR.expect(held));
    assertThat(stale.applied()).isFalse();
    assertThat(stale.reason()).isEqualTo(KvReason.VERSION);
    assertThat(kv.delete(ns, "aba", held).reason()).isEqualTo(KvReason.VERSION);
    assertThat(kv.get(ns, "aba").value().asInt()).isEqualTo(9);
  }

  @Test
  void everyWriteAnswersWithCurrentValueAndVersion() {
    kv.put(ns, "k", Map.of("chargeId", "ch_1"), HOUR);
    KvWriteResult winner = kv.put(ns, "k", Map.of("chargeId", "ch_2"), HOUR);

    KvWriteResult lostOnce = kv.putIfAbsent(ns, "k", Map.of("chargeId", "ch_3"), HOUR);
    assertThat(lostOnce.applied()).isFalse();
    assertThat(lostOnce.reason()).isEqualTo(KvReason.EXISTS);
    assertThat(lostOnce.found()).isTrue();
    assertThat(lostOnce.value().get("chargeId").asText()).isEqualTo("ch_2");
    assertThat(lostOnce.version()).isEqualTo(winner.version());
    assertThat(lostOnce.expiresAt()).isEqualTo(winner.expiresAt());

    KvWriteResult lostCas = kv.put(ns, "k", "x", HOUR.expect(1));
    assertThat(lostCas.value().get("chargeId").asText()).isEqualTo("ch_2");
    assertThat(lostCas.version()).isEqualTo(winner.version());

    KvWriteResult lostDelete = kv.delete(ns, "k", 1);
    assertThat(lostDelete.value().get("chargeId").asText()).isEqualTo("ch_2");

    KvWriteResult lostIncr = kv.incr(ns, "k", 1, HOUR);
    assertThat(lostIncr.reason()).isEqualTo(KvReason.TYPE);
    assertThat(lostIncr.value().get("chargeId").asText()).isEqualTo("ch_2");

    KvWriteResult applied = kv.put(ns, "k", "y", HOUR);
    assertThat(applied.applied()).isTrue();
    assertThat(applied.reason()).isNull();
    assertThat(applied.value().asText()).isEqualTo("y");
    assertThat(applied.version()).isEqualTo(winner.version() + 1);

    KvWriteResult deleted = kv.delete(ns, "k");
    assertThat(deleted.applied()).isTrue();
    assertThat(deleted.found()).as("after a delete, the current state is absent").isFalse();
  }

  @Test
  void deleteOfAnAbsentKeySaysAbsent() {
    KvWriteResult r = kv.delete(ns, "nothing");
    assertThat(r.applied()).isFalse();
    assertThat(r.reason()).isEqualTo(KvReason.ABSENT);
    assertThat(r.found()).isFalse();
    assertThat(r.version()).isZero();
  }

  @Test
  void reasonSetIsClosed() {
    assertThat(Arrays.stream(KvReason.values()).map(Enum::name))
        .containsExactly("EXISTS", "ABSENT", "VERSION", "LIMIT", "TYPE");
  }

  // -------------------------------------------------------------------------------------------- incr

  @Test
  void incrWithMaxBreachWritesNothingAndSaysLimit() {
    KvWriteResult eight = kv.incr(ns, "quota", 8, HOUR.max(10));
    assertThat(eight.applied()).isTrue();

    KvWriteResult breach = kv.incr(ns, "quota", 3, HOUR.max(10));
    assertThat(breach.applied()).isFalse();
    assertThat(breach.reason()).isEqualTo(KvReason.LIMIT);
    assertThat(breach.longValue()).as("no saturation: the value stays").isEqualTo(8);
    assertThat(breach.version()).isEqualTo(eight.version());
    assertThat(kv.get(ns, "quota").value().asLong()).isEqualTo(8);

    KvWriteResult fits = kv.incr(ns, "quota", 2, HOUR.max(10));
    assertThat(fits.applied()).isTrue();
    assertThat(fits.longValue()).isEqualTo(10);

    KvWriteResult firstTooBig = kv.incr(ns, "fresh", 11, HOUR.max(10));
    assertThat(firstTooBig.reason()).isEqualTo(KvReason.LIMIT);
    assertThat(firstTooBig.found()).isFalse();
    assertThat(fx.physicalRows(ns, "fresh")).as("a refused first increment creates nothing").isZero();
  }

  @Test
  void incrOnNonNumberSaysType() {
    kv.put(ns, "s", "12", HOUR);
    kv.put(ns, "f", 1.5, HOUR);
    kv.put(ns, "o", Map.of("n", 1), HOUR);
    kv.put(ns, "n", null, HOUR);
    for (String k : List.of("s", "f", "o", "n")) {
      KvWriteResult r = kv.incr(ns, k, 1, HOUR);
      assertThat(r.applied()).as(k).isFalse();
      assertThat(r.reason()).as(k).isEqualTo(KvReason.TYPE);
      assertThat(r.found()).as(k).isTrue();
      assertThat(r.version()).as(k).isEqualTo(kv.get(ns, k).version()); // the current version, unchanged
    }
    kv.put(ns, "whole", 2.0, HOUR);
    assertThat(kv.incr(ns, "whole", 1, HOUR).longValue()).as("an integral number is a number").isEqualTo(3);
  }

  @Test
  void incrOverflowFailsLoudly() {
    kv.incr(ns, "big", Long.MAX_VALUE, HOUR);
    KvWriteResult over = kv.incr(ns, "big", 1, HOUR);
    assertThat(over.applied()).isFalse();
    assertThat(over.reason()).isEqualTo(KvReason.TYPE);
    assertThat(over.longValue()).isEqualTo(Long.MAX_VALUE);

    kv.incr(ns, "small", Long.MIN_VALUE, HOUR);
    assertThat(kv.incr(ns, "small", -1, HOUR).reason()).isEqualTo(KvReason.TYPE);

    kv.put(ns, "huge", new BigInteger("100000000000000000000000000000"), HOUR);
    KvWriteResult huge = kv.incr(ns, "huge", -1, HOUR);
    assertThat(huge.reason()).isEqualTo(KvReason.TYPE);
    assertThatThrownBy(huge::longValue).isInstanceOf(ArithmeticException.class);
  }

  @Test
  void incrTakesNoExpectAndOnlyIncrTakesMax() {
    assertThatThrownBy(() -> kv.incr(ns, "c", 1, HOUR.expect(1))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> kv.put(ns, "c", 1, HOUR.max(1))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> kv.putIfAbsent(ns, "c", 1, HOUR.expect(2))).isInstanceOf(IllegalArgumentException.class);
    assertThat(fx.physicalRows(ns, "c")).isZero();
  }

  // ------------------------------------------------------------------------------------------ reads

  @Test
  void foundIsDistinctFromStoredNull() {
    long written = kv.put(ns, "null", null, HOUR).version();
    KvEntry stored = kv.get(ns, "null");
    assertThat(stored.found()).isTrue();
    assertThat(stored.value()).isEqualTo(NullNode.getInstance());
    assertThat(stored.version()).isEqualTo(written).isPositive();

    KvEntry absent = kv.get(ns, "absent");
    assertThat(absent.found()).isFalse();
    assertThat(absent.value()).isNull();
    assertThat(absent.version()).isZero();

    assertThat(kv.getMany(ns, List.of("null", "absent"))).extracting(KvEntry::found).containsExactly(true, false);
    assertThat(kv.putIfAbsent(ns, "null", 1, HOUR).reason()).as("a stored null exists").isEqualTo(KvReason.EXISTS);
  }

  @Test
  void multiKeyReadsReturnRowsInRequestOrder() {
    kv.put(ns, "a", 1, HOUR);
    kv.put(ns, "b", 2, HOUR);
    kv.put(ns, "c", 3, HOUR);
    List<KvEntry> rows = kv.getMany(ns, List.of("c", "a", "missing", "b", "a"));
    assertThat(rows).extracting(KvEntry::key).containsExactly("c", "a", "missing", "b", "a");
    assertThat(rows).extracting(KvEntry::found).containsExactly(true, true, false, true, true);
    assertThat(rows.get(0).value().asInt()).isEqualTo(3);
    assertThat(kv.getMany(ns, List.of())).isEmpty();
  }

  @Test
  void unknownNamespaceReadsEmpty() {
    String unknown = "never.written." + ns.length();
    assertThat(kv.get(unknown, "k").found()).isFalse();
    assertThat(kv.getMany(unknown, List.of("a", "b"))).extracting(KvEntry::found).containsExactly(false, false);
    assertThat(kv.getPrefix(unknown, "a", null, 10).rows()).isEmpty();
    assertThat(kv.getPrefix(unknown, "a", null, 10).truncated()).isFalse();
    assertThat(kv.delete(unknown, "k").reason()).isEqualTo(KvReason.ABSENT);
  }

  @Test
  void valuesAreNeverCached() {
    kv.put(ns, "k", "first", HOUR);
    assertThat(kv.get(ns, "k").value().asText()).isEqualTo("first");
    fx.update("update queen.kv set value = '\"second\"', version = version + 1 where namespace = ? and key = ?", ns, "k");
    assertThat(kv.get(ns, "k").value().asText()).isEqualTo("second");
    fx.update("delete from queen.kv where namespace = ? and key = ?", ns, "k");
    assertThat(kv.get(ns, "k").found()).isFalse();
  }

  // ------------------------------------------------------------------------------------------ limits

  @Test
  void invalidNamespaceIsRejected() {
    for (String bad : List.of("", "has space", "a/b", "é", "x".repeat(129))) {
      assertThatThrownBy(() -> kv.put(bad, "k", 1, HOUR)).as(bad).isInstanceOf(IllegalArgumentException.class);
      assertThatThrownBy(() -> kv.get(bad, "k")).as(bad).isInstanceOf(IllegalArgumentException.class);
      assertThat(fx.sqlState("select * from queen.kv_put(?, 'k', '1', null, true)", bad)).as(bad).isEqualTo("22023");
    }
    assertThat(kv.put("Aa0._:-" + "x".repeat(121), "k", 1, HOUR).applied()).isTrue();
  }

  @Test
  void keyOver512BytesIsRejected() {
    String max = "k".repeat(512);
    assertThat(kv.put(ns, max, 1, HOUR).applied()).isTrue();
    assertThatThrownBy(() -> kv.put(ns, max + "k", 1, HOUR)).isInstanceOf(IllegalArgumentException.class);
    String multiByte = "é".repeat(257); // 514 bytes, 257 characters
    assertThatThrownBy(() -> kv.put(ns, multiByte, 1, HOUR)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> kv.get(ns, "")).isInstanceOf(IllegalArgumentException.class);
    assertThat(fx.sqlState("select * from queen.kv_put(?, ?, '1', null, true)", ns, multiByte)).isEqualTo("22023");
    assertThat(fx.sqlState("select * from queen.kv_delete(?, ?)", ns, max + "k")).isEqualTo("22023");
  }

  @Test
  void valueOver64KiBIsRejected() {
    String atLimit = "x".repeat(65536 - 2); // a JSON string: the quotes count
    assertThat(kv.put(ns, "k", atLimit, HOUR).applied()).isTrue();
    assertThatThrownBy(() -> kv.put(ns, "k2", atLimit + "x", HOUR))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("65536");
    String multiByte = "é".repeat(32768); // 65536 bytes of text, 65538 with the quotes
    assertThatThrownBy(() -> kv.putIfAbsent(ns, "k3", multiByte, HOUR)).isInstanceOf(IllegalArgumentException.class);
    assertThat(fx.physicalRows(ns, "k2") + fx.physicalRows(ns, "k3")).isZero();

    // and in SQL, for any caller
    assertThat(fx.sqlState("select * from queen.kv_put(?, 'k4', ?, null, true)", ns, "\"" + atLimit + "x\""))
        .isEqualTo("22023");
  }
}
