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
    assertThat(h.next(1_000, POLL, 10)).isNull(); // a scan at start
    h.popped(null, List.of(), false);
    assertThat(h.next(1_001, POLL, 10)).isEmpty(); // nothing named: wait
    h.woken(List.of("a", "b"));
    assertThat(h.next(1_002, POLL, 10)).containsExactly("a", "b");
    assertThat(h.next(1_003, POLL, 10)).isEmpty();
    assertThat(h.next(1_000 + POLL, POLL, 10)).isNull(); // once per poll interval, a scan
  }

  @Test
  void aWakeUpThatNamesNothingAsksForAScan() {
    Hints h = new Hints(false);
    h.next(0, POLL, 10);
    h.woken(null);
    assertThat(h.next(1, POLL, 10)).isNull();
  }

  @Test
  void manyMoreNamesThanThePopMayTakeMakeItScan() {
    Hints h = new Hints(false);
    h.next(0, POLL, 4);
    List<String> names = new java.util.ArrayList<>();
    for (int i = 0; i < 4 + Hints.SLACK; i++) {
      names.add("p" + i);
    }
    h.woken(names);
    assertThat(h.next(1, POLL, 4)).hasSize(4 + Hints.SLACK); // within the slack: by name
    h.popped(names.toArray(new String[0]), List.of("p0", "p1", "p2", "p3"), true);
    h.woken(List.of("q0", "q1", "q2", "q3", "q4")); // 69 names ready, for a pop that may take 4
    assertThat(h.next(2, POLL, 4)).isNull(); // more than the slack allows: a scan, the names dropped
    h.popped(null, List.of("p4", "p5", "p6", "p7"), true);
    assertThat(h.next(3, POLL, 4)).isNull(); // a full scan scans again
    h.popped(null, List.of("p8"), false);
    assertThat(h.next(4, POLL, 4)).isEmpty();
  }

  @Test
  void aWakeUpThatNamesNothingBringsBackEveryHeldPartitionWhenItsUnitIsSettled() {
    Hints h = new Hints(false);
    h.next(0, POLL, 10);
    h.hold(List.of("a", "b"));
    h.woken(null); // a push that could not name its partitions: it may have gone into a held one
    assertThat(h.next(1, POLL, 10)).isNull(); // the scan (it passes the held partitions)
    h.popped(null, List.of(), false);
    assertThat(h.settled(List.of("a"), false)).isTrue();
    assertThat(h.next(2, POLL, 10)).containsExactly("a");
    h.hold(List.of("c")); // held after that wake-up: not brought back
    assertThat(h.settled(List.of("b", "c"), false)).isTrue();
    assertThat(h.next(3, POLL, 10)).containsExactly("b");
  }

  @Test
  void aPartitionNamedWhileAUnitHoldsItComesBackWhenTheUnitIsSettled() {
    Hints h = new Hints(false);
    h.next(0, POLL, 10);
    h.hold(List.of("a"));
    h.woken(List.of("a"));
    assertThat(h.next(1, POLL, 10)).isEmpty();
    assertThat(h.settled(List.of("a"), false)).isTrue();
    assertThat(h.next(2, POLL, 10)).containsExactly("a");
    // settled with nothing named meanwhile: nothing to pop, unless the unit may have left more
    h.hold(List.of("b"));
    assertThat(h.settled(List.of("b"), false)).isFalse();
    h.hold(List.of("c"));
    assertThat(h.settled(List.of("c"), true)).isTrue();
    assertThat(h.next(3, POLL, 10)).containsExactly("c");
  }

  @Test
  void aNameThatArrivedDuringThePopOfItsPartitionWaitsForTheUnit() {
    Hints h = new Hints(false);
    h.next(0, POLL, 10);
    h.woken(List.of("a"));
    String[] names = h.next(1, POLL, 10);
    h.woken(List.of("a")); // a push while the pop ran
    h.hold(List.of("a"));
    h.popped(names, List.of("a"), false);
    assertThat(h.next(2, POLL, 10)).isEmpty();
    assertThat(h.settled(List.of("a"), false)).isTrue();
    assertThat(h.next(3, POLL, 10)).containsExactly("a");
  }

  @Test
  void aFullPopKeepsTheNamesItDidNotTakeAndAFullScanScansAgain() {
    Hints h = new Hints(false);
    h.next(0, POLL, 10);
    h.woken(List.of("a", "b", "c"));
    String[] names = h.next(1, POLL, 10);
    h.hold(List.of("a"));
    h.popped(names, List.of("a"), true);
    assertThat(h.next(2, POLL, 10)).containsExactlyInAnyOrder("b", "c");
    h.popped(null, List.of("x"), true);
    assertThat(h.next(3, POLL, 10)).isNull();
  }

  @Test
  void aPinnedSubscriptionAlwaysPopsItsPartitionByName() {
    Hints h = new Hints(true);
    h.woken(List.of("a"));
    assertThat(h.next(1, POLL, 10)).isNull();
    assertThat(h.next(2, POLL, 10)).isNull();
  }
}
