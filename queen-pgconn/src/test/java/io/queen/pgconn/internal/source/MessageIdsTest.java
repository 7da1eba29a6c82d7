package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class MessageIdsTest {
  @Test
  void theSeedsShapes() {
    assertThat(MessageIds.change("00c0b669", 0x1570D68L, 0)).isEqualTo("pg:00c0b669:0000000001570D68:0");
    assertThat(MessageIds.change("00c0b669", 0x1570EA0L, 1)).isEqualTo("pg:00c0b669:0000000001570EA0:1");
    assertThat(MessageIds.changeSecond("00c0b669", 0x1570EA0L, 3)).isEqualTo("pg:00c0b669:0000000001570EA0:3.1");
    assertThat(MessageIds.change("ffffffff", -1L, Integer.MAX_VALUE))
        .isEqualTo("pg:ffffffff:FFFFFFFFFFFFFFFF:2147483647");
    assertThat(MessageIds.snapshot("00c0b669", 12, 7)).isEqualTo("pg:00c0b669:s:12:7");
    assertThat(MessageIds.fill("00c0b669", 12, 0)).isEqualTo("pg:00c0b669:s:12:f0");
  }

  @Test
  void epochsAreEightLowerCaseHexDigitsAndRandom() {
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < 1000; i++) {
      String e = MessageIds.newEpoch();
      assertThat(e).matches("[0-9a-f]{8}");
      seen.add(e);
    }
    assertThat(seen).hasSizeGreaterThan(990);
  }

  @Test
  void refusesWhatWouldMakeAnotherShape() {
    assertThatThrownBy(() -> MessageIds.change("00C0B669", 1, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MessageIds.change("abc", 1, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MessageIds.change(null, 1, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MessageIds.change("00c0b669", 1, -1)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MessageIds.snapshot("00c0b669", -1, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> MessageIds.fill("00c0b669", 0, -2)).isInstanceOf(IllegalArgumentException.class);
  }
}
