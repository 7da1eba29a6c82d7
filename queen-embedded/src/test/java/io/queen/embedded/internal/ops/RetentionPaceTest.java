package io.queen.embedded.internal.ops;

import io.queen.embedded.internal.log.Metrics;
import org.junit.jupiter.api.Test;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * How the janitor's rests follow its passes ({@link RetentionJanitor#pace}): a janitor whose passes keep taking longer
 * than their period is behind ingest and rests less, down to a floor; passes that leave half the period to spare bring
 * the usual rests back, one step each. The effect on a table under load is in
 * src-test/bench/BENCHMARKS.md (sustained_push_pop).
 */
class RetentionPaceTest {
  private static final long LONG = RetentionJanitor.PERIOD_MS + 5_000;
  private static final long SHORT = RetentionJanitor.PERIOD_MS / 3;
  /** Within the period but more than half of it: the janitor keeps up, with little to spare. */
  private static final long FULL = RetentionJanitor.PERIOD_MS * 4 / 5;

  private final RetentionJanitor janitor = new RetentionJanitor("pace-test", null, "\"queen\"", Metrics.NOOP,
      java.time.Duration.ZERO);

  @Test
  void oneLongPassIsABacklogAndChangesNothing() {
    assertThat(janitor.pace(LONG)).isEqualTo(RetentionJanitor.REST_FACTOR);
    assertThat(janitor.pace(SHORT)).isEqualTo(RetentionJanitor.REST_FACTOR);
    assertThat(janitor.pace(LONG)).as("the count starts again after a pass within the period")
        .isEqualTo(RetentionJanitor.REST_FACTOR);
  }

  @Test
  void passesLongerThanThePeriodInARowHalveTheRestsDownToTheFloorAndShortOnesBringThemBack() {
    assertThat(janitor.pace(LONG)).isEqualTo(2.0);
    assertThat(janitor.pace(LONG)).isEqualTo(1.0);
    assertThat(janitor.pace(LONG)).isEqualTo(0.5);
    assertThat(janitor.pace(LONG)).as("the floor: about two thirds of one backend")
        .isEqualTo(RetentionJanitor.MIN_REST_FACTOR);
    assertThat(janitor.pace(FULL)).as("keeping up at this pace, with little to spare: it stays").isEqualTo(0.5);
    assertThat(janitor.pace(SHORT)).isEqualTo(1.0);
    assertThat(janitor.pace(LONG)).as("one long pass after a short one: not yet behind").isEqualTo(1.0);
    assertThat(janitor.pace(FULL)).isEqualTo(1.0);
    assertThat(janitor.pace(SHORT)).isEqualTo(2.0);
    assertThat(janitor.pace(SHORT)).isEqualTo(RetentionJanitor.REST_FACTOR);
  }
}
