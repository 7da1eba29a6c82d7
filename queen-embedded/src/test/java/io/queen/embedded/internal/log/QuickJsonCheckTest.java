package io.queen.embedded.internal.log;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.queen.PayloadSerializationException;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The quick pass of the payload check never accepts what the full check (Jackson's strict parser with the reader's
 * limits, plus the NUL and surrogate rules) refuses, and counts the same UTF-8 length. No database: both sides are
 * the JVM's; what reaches PostgreSQL is covered by the push tests (PayloadLimitsTest).
 */
class QuickJsonCheckTest {
  private final JsonCodec codec = new JsonCodec(new ObjectMapper());
  private final QuickJsonCheck quick = new QuickJsonCheck(codec.constraints());

  @Test
  void settlesValidDocumentsWithTheirUtf8Length() {
    List<String> valid = List.of("{}", "[]", "0", "-0", "1.5e-3", "-12E+4", "true", "false", "null", "\"\"",
        " {\"a\" : [1, 2.50, {\"b\": null}], \"c\": \"x\\\"y\\\\z\\/\\b\\f\\n\\r\\t\"}\n",
        "{\"op\":\"c\",\"key\":{\"id\":1},\"after\":{\"n\":\"caf\u00e9 \u20ac \ud83d\ude00\"}}",
        "\"\\u00e9\\ud83d\\ude00\\uFFFF\"", "[[[[]]]]", "{\"\":{}}", "[1,[2,[3]],{\"a\":[]}]");
    for (String s : valid) {
      assertThat(quick.bytes(s)).as(s).isEqualTo(JsonCodec.utf8Length(s)).isEqualTo(codec.fullCheck(s, "p"));
    }
  }

  @Test
  void passesEverythingElseToTheFullCheck() {
    List<String> others = List.of("", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "'a'", "01", "1.", ".5",
        "+1", "1e", "-", "NaN", "tru", "nul", "[1 2]", "{} {}", "1 2", "\"a", "\"\\x\"", "\"\\u00\"", "\"\\u0000\"",
        "\"\u0000\"", "\"a\nb\"", "\"\\ud800\"", "\"\\udc00\"", "\"\ud800\"", "\"\udc00x\"", "\"\\ud800\\u0041\"",
        "\ufeff{}", "[" + "[".repeat(70) + "]".repeat(70) + "]", "1".repeat(1001), "{\"" + "n".repeat(50_001) + "\":1}");
    for (String s : others) {
      assertThat(quick.bytes(s)).as(s.length() > 80 ? s.substring(0, 80) : s).isEqualTo(-1);
    }
    // deep but valid: the full check accepts what the quick pass left to it
    String deep = "[".repeat(70) + "]".repeat(70);
    assertThat(codec.check(deep, "p")).isEqualTo(140);
    assertThatThrownBy(() -> codec.check("\"\\u0000\"", "p")).isInstanceOf(PayloadSerializationException.class)
        .hasMessageContaining("\\u0000");
  }

  @Test
  void aReaderWithATokenLimitSkipsTheQuickPass() {
    ObjectMapper m = JsonMapper.builder().build();
    m.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxTokenCount(3).build());
    JsonCodec limited = new JsonCodec(m);
    assertThat(new QuickJsonCheck(limited.constraints()).bytes("[1]")).isEqualTo(-1);
    assertThatThrownBy(() -> limited.check("[1,2,3,4]", "p")).isInstanceOf(PayloadSerializationException.class);
  }

  /** At a reader's own small limits, the quick pass settles only what is within them and the full check takes the rest. */
  @Test
  void smallLimitsAtTheirBoundaries() {
    ObjectMapper m = JsonMapper.builder().build();
    m.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(2).maxNumberLength(3)
        .maxNameLength(4).maxDocumentLength(400).build());
    JsonCodec small = new JsonCodec(m);
    QuickJsonCheck q = new QuickJsonCheck(small.constraints());
    for (String s : List.of("[[1]]", "[[[1]]]", "123", "1234", "-123", "1.25", "{\"abcd\":1}", "{\"abcde\":1}",
        "{\"ab\\u0041\":1}", "\"" + "x".repeat(96) + "\"", "\"" + "x".repeat(120) + "\"")) {
      long quick = q.bytes(s);
      boolean full;
      try {
        small.fullCheck(s, "p");
        full = true;
      } catch (PayloadSerializationException e) {
        full = false;
      }
      if (quick >= 0) {
        assertThat(full).as(s).isTrue();
      }
    }
    assertThat(q.bytes("[1]")).isEqualTo(3); // within every limit
    assertThat(q.bytes("123")).isEqualTo(3);
    assertThat(q.bytes("1234")).isEqualTo(-1);
    assertThat(q.bytes("[[1]]")).isEqualTo(-1); // depth 2 is the limit: left to the full check
    assertThatThrownBy(() -> small.check("[[[1]]]", "p")).isInstanceOf(PayloadSerializationException.class);
    assertThatThrownBy(() -> small.check("{\"abcde\":1}", "p")).isInstanceOf(PayloadSerializationException.class);
    // the codec raises a document limit to 64 MiB (what any node may write), so 400 does not hold
    assertThat(small.constraints().getMaxDocumentLength()).isEqualTo(JsonCodec.MAX_TEXT_BYTES);
    assertThat(q.bytes("\"" + "x".repeat(120) + "\"")).isEqualTo(122);
  }

  /** Random documents, mutated a character at a time: whatever the quick pass accepts, the full check accepts. */
  @Test
  void neverAcceptsWhatTheFullCheckRefuses() {
    SplittableRandom r = new SplittableRandom(20261206);
    String[] pieces = {"{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "0", "1", "-", ".", "e", "+", " ", "\n", "t", "true",
        "null", "a", "\u00e9", "\ud83d", "\ude00", "\u0000", "\u001f", "d800", "dc00", "0000", "00e9", "/", "E", "\t", "\r",
        "\f", "\u000b", "\u00a0", "\u2028", "\u007f", "\u0085", "false", "\\udc00", "\\ud83d", "\ufeff"};
    int accepted = 0;
    for (int k = 0; k < 200_000; k++) {
      StringBuilder b = new StringBuilder(document(r, 0));
      int mutations = r.nextInt(3);
      for (int m = 0; m < mutations && b.length() > 0; m++) {
        int at = r.nextInt(b.length());
        switch (r.nextInt(3)) {
          case 0 -> b.insert(at, pieces[r.nextInt(pieces.length)]);
          case 1 -> b.deleteCharAt(at);
          default -> b.replace(at, at + 1, pieces[r.nextInt(pieces.length)]);
        }
      }
      String s = b.toString();
      long q = quick.bytes(s);
      if (q >= 0) {
        accepted++;
        assertThat(codec.fullCheck(s, "p")).as(s).isEqualTo(q).isEqualTo(JsonCodec.utf8Length(s));
      }
    }
    assertThat(accepted).as("documents the quick pass settled").isGreaterThan(50_000);
  }

  private static String document(SplittableRandom r, int depth) {
    switch (depth > 4 ? r.nextInt(4) : r.nextInt(7)) {
      case 0:
        return r.nextBoolean() ? "true" : "null";
      case 1:
        return (r.nextBoolean() ? "-" : "") + r.nextInt(1000) + (r.nextBoolean() ? "." + r.nextInt(100) : "")
            + (r.nextInt(4) == 0 ? "e" + (r.nextBoolean() ? "-" : "+") + r.nextInt(30) : "");
      case 2:
      case 3:
        return string(r);
      case 4:
      case 5: {
        StringBuilder b = new StringBuilder("{");
        int n = r.nextInt(4);
        for (int k = 0; k < n; k++) {
          b.append(k > 0 ? "," : "").append(string(r)).append(r.nextBoolean() ? ":" : " : ").append(document(r, depth + 1));
        }
        return b.append('}').toString();
      }
      default: {
        StringBuilder b = new StringBuilder("[");
        int n = r.nextInt(4);
        for (int k = 0; k < n; k++) {
          b.append(k > 0 ? ", " : "").append(document(r, depth + 1));
        }
        return b.append(']').toString();
      }
    }
  }

  private static String string(SplittableRandom r) {
    String[] parts = {"a", "b", " ", "\u00e9", "\u20ac", "\ud83d\ude00", "\\\"", "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "/"};
    StringBuilder b = new StringBuilder("\"");
    int n = r.nextInt(5);
    for (int k = 0; k < n; k++) {
      b.append(parts[r.nextInt(parts.length)]);
    }
    return b.append('"').toString();
  }
}
