package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;

class PartitionKeysTest {
  static String hashed(String s) throws Exception {
    return "~" + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
        .digest(s.getBytes(StandardCharsets.UTF_8))).substring(0, 32);
  }

  @Test
  void oneValueAsPrinted() {
    assertThat(PartitionKeys.of(List.of("42"))).isEqualTo("42");
    assertThat(PartitionKeys.of(List.of("a|b\\c"))).isEqualTo("a|b\\c");
    assertThat(PartitionKeys.of(Arrays.asList((String) null))).isEqualTo("\\N");
    assertThat(PartitionKeys.SINGLE).isEqualTo("all");
  }

  @Test
  void severalJoinedWithBarsEscapedAndNullAsBackslashN() {
    assertThat(PartitionKeys.of(List.of("1", "2"))).isEqualTo("1|2");
    assertThat(PartitionKeys.of(List.of("a|b", "c\\d"))).isEqualTo("a\\|b|c\\\\d");
    assertThat(PartitionKeys.of(Arrays.asList("x", null, ""))).isEqualTo("x|\\N|");
    assertThat(PartitionKeys.of(Arrays.asList(null, "N"))).isEqualTo("\\N|N");
    // a NULL and the text \N stay apart
    assertThat(PartitionKeys.of(Arrays.asList("\\N", "1"))).isEqualTo("\\\\N|1");
    assertThat(PartitionKeys.of(List.of("", ""))).isEqualTo("|");
  }

  @Test
  void over128BytesBecomesATildeAndSha256() throws Exception {
    String at = "k".repeat(128);
    assertThat(PartitionKeys.of(List.of(at))).isEqualTo(at);
    String over = "k".repeat(129);
    assertThat(PartitionKeys.of(List.of(over))).isEqualTo(hashed(over)).hasSize(33);
    // the escaped, joined name is what is measured and hashed
    String joined = "a\\|" + "b".repeat(60) + "|" + "c".repeat(64); // 3 + 60 + 1 + 64 = 128 bytes
    assertThat(PartitionKeys.of(List.of("a|" + "b".repeat(60), "c".repeat(64)))).isEqualTo(joined);
    String longer = "a\\|" + "b".repeat(61) + "|" + "c".repeat(64);
    assertThat(PartitionKeys.of(List.of("a|" + "b".repeat(61), "c".repeat(64)))).isEqualTo(hashed(longer));
  }

  @Test
  void measuresUtf8BytesNotCharactersAtTheEdge() throws Exception {
    String e = "é".repeat(64); // 128 bytes, 64 chars
    assertThat(PartitionKeys.of(List.of(e))).isEqualTo(e);
    String e1 = "é".repeat(63) + "ab"; // 128 bytes
    assertThat(PartitionKeys.of(List.of(e1))).isEqualTo(e1);
    String over = "é".repeat(64) + "a"; // 129 bytes, 65 chars
    assertThat(PartitionKeys.of(List.of(over))).isEqualTo(hashed(over));
    String emoji = "😀".repeat(32); // 128 bytes in 4-byte characters
    assertThat(PartitionKeys.of(List.of(emoji))).isEqualTo(emoji);
    assertThat(PartitionKeys.of(List.of(emoji + "x"))).isEqualTo(hashed(emoji + "x"));
  }

  @Test
  void anEmptyNameQueenWouldRefuseIsHashedAndNoValuesIsRefused() throws Exception {
    assertThat(PartitionKeys.of(List.of(""))).isEqualTo(hashed("")).isEqualTo("~e3b0c44298fc1c149afbf4c8996fb924");
    assertThatThrownBy(() -> PartitionKeys.of(List.of())).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> PartitionKeys.of(null)).isInstanceOf(IllegalArgumentException.class);
  }
}
