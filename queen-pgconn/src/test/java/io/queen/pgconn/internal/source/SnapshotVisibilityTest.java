package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Reading {@code pg_current_snapshot()} for a 32-bit xid as pgoutput sends it (the key change's read-back). */
class SnapshotVisibilityTest {

  @Test
  void aTransactionIsVisibleBelowXminOrWhenNotRunning() {
    assertThat(StreamEvents.visible("100:110:", 99)).isTrue();
    assertThat(StreamEvents.visible("100:110:100,105", 105)).isFalse();
    assertThat(StreamEvents.visible("100:110:100,105", 104)).isTrue();
    assertThat(StreamEvents.visible("100:110:100,105", 100)).isFalse();
    // the newest running transaction is not listed: xmax is one past the latest that completed
    assertThat(StreamEvents.visible("793:793:", 793)).isFalse();
    assertThat(StreamEvents.visible("793:793:", 792)).isTrue();
  }

  @Test
  void theFullIdIsTakenBelowXmaxAcrossAnEpoch() {
    long epoch = 1L << 32;
    // xmax just past an epoch boundary: an xid with high low bits belongs to the epoch before, and one just past
    // xmax is still running
    assertThat(StreamEvents.visible((epoch - 20) + ":" + (epoch + 5) + ":" + (epoch - 10), 0xFFFF_FFF6L)).isFalse();
    assertThat(StreamEvents.visible((epoch - 20) + ":" + (epoch + 5) + ":" + (epoch - 10), 0xFFFF_FFF7L)).isTrue();
    assertThat(StreamEvents.visible((epoch - 20) + ":" + (epoch + 5) + ":" + (epoch + 2), 2)).isFalse();
    assertThat(StreamEvents.visible((epoch - 20) + ":" + (epoch + 5) + ":" + (epoch + 2), 3)).isTrue();
    assertThat(StreamEvents.visible((epoch - 20) + ":" + (epoch + 5) + ":", 5)).isFalse();
    // xmax just below an epoch boundary: an xid with low low bits past it belongs to the next epoch (running)
    assertThat(StreamEvents.visible((epoch - 20) + ":" + (epoch - 3) + ":", 1)).isFalse();
    assertThat(StreamEvents.visible((epoch - 20) + ":" + (epoch - 3) + ":", 0xFFFF_FFFBL)).isTrue();
  }
}
