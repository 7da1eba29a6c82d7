package io.queen.embedded.internal.consume;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** What the claimer pops next: named partitions, a scan, or nothing. Pure bookkeeping: no database. */
class HintsTest {
  private static final long POLL = TimeUnit.MILLISECONDS.toNanos(500);

  @Test
  void theFirstPopScansThenNamedPartitionsArePoppedByName() {
    Hints h = new Hints(false);
    assertThat(h.next(1_000, POLL)).isNull(); // a scan at start
    h.popped(null, List.of(), false);
    assertThat(h.next(1_001, POLL)).isEmpty(); // nothing named: wait
    h.woken(List.of("a", "b"));
    assertThat(h.next(1_002, POLL)).containsExactly("a", "b");
    assertThat(h.next(1_003, POLL)).isEmpty();
    assertThat(h.next(1_000 + POLL, POLL)).isNull(); // once per poll interval, a scan
  }

  @Test
  void aWakeUpThatNamesNothingAsksForAScan() {
    Hints h = new Hints(false);
    h.next(0, POLL);
    h.woken(null);
    assertThat(h.next(1, POLL)).isNull();
  }

  @Test
  void aPartitionNamedWhileAUnitHoldsItComesBackWhenTheUnitIsSettled() {
    Hints h = new Hints(false);
    h.next(0, POLL);
    h.hold(List.of("a"));
    h.woken(List.of("a"));
    assertThat(h.next(1, POLL)).isEmpty();
    assertThat(h.settled(List.of("a"), false)).isTrue();
    assertThat(h.next(2, POLL)).containsExactly("a");
    // settled with nothing named meanwhile: nothing to pop, unless the unit may have left more
    h.hold(List.of("b"));
    assertThat(h.settled(List.of("b"), false)).isFalse();
    h.hold(List.of("c"));
    assertThat(h.settled(List.of("c"), true)).isTrue();
    assertThat(h.next(3, POLL)).containsExactly("c");
  }

  @Test
  void aNameThatArrivedDuringThePopOfItsPartitionWaitsForTheUnit() {
    Hints h = new Hints(false);
    h.next(0, POLL);
    h.woken(List.of("a"));
    String[] names = h.next(1, POLL);
    h.woken(List.of("a")); // a push while the pop ran
    h.hold(List.of("a"));
    h.popped(names, List.of("a"), false);
    assertThat(h.next(2, POLL)).isEmpty();
    assertThat(h.settled(List.of("a"), false)).isTrue();
    assertThat(h.next(3, POLL)).containsExactly("a");
  }

  @Test
  void aFullPopKeepsTheNamesItDidNotTakeAndAFullScanScansAgain() {
    Hints h = new Hints(false);
    h.next(0, POLL);
    h.woken(List.of("a", "b", "c"));
    String[] names = h.next(1, POLL);
    h.hold(List.of("a"));
    h.popped(names, List.of("a"), true);
    assertThat(h.next(2, POLL)).containsExactlyInAnyOrder("b", "c");
    h.popped(null, List.of("x"), true);
    assertThat(h.next(3, POLL)).isNull();
  }

  @Test
  void aPinnedSubscriptionAlwaysPopsItsPartitionByName() {
    Hints h = new Hints(true);
    h.woken(List.of("a"));
    assertThat(h.next(1, POLL)).isNull();
    assertThat(h.next(2, POLL)).isNull();
  }
}
