package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.Names;
import io.queen.PushItem;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Random;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The name checks every push makes, without a regex or an encoding per item: they must accept and refuse exactly
 * what the documented rules say. (No database: these run before any SQL.)
 */
class NamesTest {
  private static final Pattern NAME = Pattern.compile(Names.NAME_RULE);
  private static final Pattern NAMESPACE = Pattern.compile(Names.NAMESPACE_RULE);

  @Test
  void queueGroupAndNamespaceChecksMatchTheirRules() {
    Random r = new Random(7);
    String alphabet = "aZ09._-:/ é\u0000\t";
    for (int k = 0; k < 20_000; k++) {
      int len = r.nextInt(6) == 0 ? 120 + r.nextInt(20) : r.nextInt(6);
      StringBuilder sb = new StringBuilder();
      for (int i = 0; i < len; i++) {
        sb.append(alphabet.charAt(r.nextInt(alphabet.length())));
      }
      String s = sb.toString();
      assertThat(accepts(() -> Names.queue(s))).as("queue '%s'", s).isEqualTo(NAME.matcher(s).matches());
      assertThat(accepts(() -> Names.namespace(s))).as("namespace '%s'", s).isEqualTo(NAMESPACE.matcher(s).matches());
    }
    assertThatThrownBy(() -> Names.queue("a b")).hasMessage("queue name 'a b' is invalid: allowed is " + Names.NAME_RULE);
    assertThatThrownBy(() -> Names.group("__x")).hasMessageContaining("reserved");
  }

  @Test
  void partitionsAndKeysAreCountedInUtf8BytesOfUnicodeText() {
    String[] ok = {"a", "é", "€", "😀", "x".repeat(128), "é".repeat(64), "😀".repeat(32)};
    for (String s : ok) {
      assertThat(Names.partition(s)).isEqualTo(s);
      assertThat(Names.key(s)).isEqualTo(s);
    }
    String[] tooLong = {"x".repeat(129), "é".repeat(65), "€".repeat(43), "😀".repeat(33)};
    for (String s : tooLong) {
      int bytes = s.getBytes(StandardCharsets.UTF_8).length;
      assertThatThrownBy(() -> Names.partition(s)).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("partition name must be 1..128 UTF-8 bytes, was " + bytes + " bytes");
    }
    assertThatThrownBy(() -> Names.partition("")).hasMessage("partition name must be 1..128 UTF-8 bytes, was 0 bytes");
    assertThatThrownBy(() -> Names.key("k".repeat(513))).hasMessage("key must be 1..512 UTF-8 bytes, was 513 bytes");
    assertThatThrownBy(() -> Names.partition("a\u0000b")).hasMessage("partition name must not contain the NUL character");
    assertThatThrownBy(() -> Names.key("\u0000")).hasMessage("key must not contain the NUL character");
  }

  @Test
  void anUnpairedSurrogateIsRefusedNotStoredAsAReplacementCharacter() {
    // the database's UTF-8 would hold '?' instead, so the stored name would not be the one given
    assertThatThrownBy(() -> Names.partition("a\uD83D")).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("partition name holds an unpaired UTF-16 surrogate at index 1: it is not Unicode text");
    assertThatThrownBy(() -> Names.partition("\uDE00a")).hasMessageContaining("unpaired UTF-16 surrogate at index 0");
    assertThatThrownBy(() -> Names.key("k\uDE00\uD83D")).hasMessageContaining("key holds an unpaired UTF-16 surrogate");
    assertThatThrownBy(() -> PushItem.of("p\uD83D", Map.of())).hasMessageContaining("unpaired UTF-16 surrogate");
  }

  private static boolean accepts(Runnable r) {
    try {
      r.run();
      return true;
    } catch (IllegalArgumentException e) {
      return false;
    }
  }
}
