package io.queen.embedded.internal.log;

import com.fasterxml.jackson.core.StreamReadConstraints;

/**
 * One pass over JSON text that settles the common case of {@link JsonCodec#check}: text that is one standard JSON
 * document (RFC 8259: no comments, no leading zeros, no {@code NaN}, no trailing commas, no raw control characters in
 * strings), without a NUL (raw or escaped) or an unpaired surrogate, and well within the reader's limits. For such
 * text it returns the UTF-8 length; for anything else it returns {@code -1} and says nothing more: the full check
 * (a strict Jackson parser with the reader's limits) then decides and words the error. So this class may pass
 * valid text on to the full check, but must never accept text the full check refuses.
 *
 * <p>"Well within" is measured on the raw text, which is never shorter than what the reader counts: a string's or
 * name's characters between the quotes (escapes as written), a number's characters (sign included), the whole
 * text's characters against a fourth of a document limit. Nesting deeper than 63 levels goes to the full check.
 * A reader with a token limit skips this pass.
 *
 * <p>Why: a push checks every payload, and the source connector builds hundreds of thousands per second; Jackson's
 * parser, run to the end of each document, took a fifth of the source's committer thread.
 */
final class QuickJsonCheck {
  private static final int MAX_DEPTH = 63; // one bit per level of a long

  private final boolean enabled;
  private final int maxDepth;
  private final int maxNumber;
  private final int maxString;
  private final int maxName;
  private final long maxChars;

  QuickJsonCheck(StreamReadConstraints c) {
    this.enabled = !c.hasMaxTokenCount();
    this.maxDepth = Math.min(MAX_DEPTH, c.getMaxNestingDepth() - 1);
    this.maxNumber = c.getMaxNumberLength();
    this.maxString = c.getMaxStringLength();
    this.maxName = c.getMaxNameLength();
    this.maxChars = c.hasMaxDocumentLength() ? c.getMaxDocumentLength() / 4 : Long.MAX_VALUE;
  }

  /** The text's UTF-8 length when it is certainly valid and within the limits; otherwise -1. */
  long bytes(String s) {
    int n = s.length();
    if (!enabled || n > maxChars) {
      return -1;
    }
    Pass p = new Pass(s);
    return p.run() ? p.bytes : -1;
  }

  /** The state of one pass: the position, the bytes counted beyond one per char, the open containers. */
  private final class Pass {
    private final String s;
    private final int n;
    private int i;
    private long bytes;
    private int depth;
    private long objects; // bit d: level d is an object

    Pass(String s) {
      this.s = s;
      this.n = s.length();
      this.bytes = n;
    }

    boolean run() {
      ws();
      while (true) {
        // a value starts at i
        if (i >= n) {
          return false;
        }
        char c = s.charAt(i);
        if (c == '{' || c == '[') {
          if (++depth > maxDepth) {
            return false;
          }
          i++;
          ws();
          if (c == '{') {
            objects |= 1L << depth;
            if (i < n && s.charAt(i) == '}') {
              i++;
              depth--;
            } else {
              if (!member()) {
                return false;
              }
              continue;
            }
          } else {
            objects &= ~(1L << depth);
            if (i < n && s.charAt(i) == ']') {
              i++;
              depth--;
            } else {
              continue;
            }
          }
        } else if (c == '"') {
          if (!string(maxString)) {
            return false;
          }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
          if (!number()) {
            return false;
          }
        } else if (!literal(c)) {
          return false;
        }
        // after a value: a comma, the end of its container, or the end of the text
        while (true) {
          ws();
          if (depth == 0) {
            return i == n;
          }
          if (i >= n) {
            return false;
          }
          char d = s.charAt(i);
          boolean object = (objects >>> depth & 1) != 0;
          if (d == ',') {
            i++;
            ws();
            if (object && !member()) {
              return false;
            }
            break;
          }
          if (d != (object ? '}' : ']')) {
            return false;
          }
          i++;
          depth--;
        }
      }
    }

    /** A member's name and its colon; leaves i at the value. */
    private boolean member() {
      if (i >= n || s.charAt(i) != '"' || !string(maxName)) {
        return false;
      }
      ws();
      if (i >= n || s.charAt(i) != ':') {
        return false;
      }
      i++;
      ws();
      return true;
    }

    private void ws() {
      while (i < n) {
        char c = s.charAt(i);
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
          return;
        }
        i++;
      }
    }

    /** A string from its opening quote; counts the bytes of its characters beyond one each. */
    private boolean string(int limit) {
      int start = ++i;
      while (i < n) {
        char c = s.charAt(i);
        if (c == '"') {
          i++;
          return i - start - 1 <= limit;
        }
        if (c == '\\') {
          if (i + 1 >= n) {
            return false;
          }
          char e = s.charAt(i + 1);
          if (e == 'u') {
            int cp = hex4(i + 2);
            if (cp <= 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) {
              return false; // not hex, a NUL, or a low surrogate alone
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (i + 7 >= n || s.charAt(i + 6) != '\\' || s.charAt(i + 7) != 'u') {
                return false;
              }
              int low = hex4(i + 8);
              if (low < 0xDC00 || low > 0xDFFF) {
                return false;
              }
              i += 12;
            } else {
              i += 6;
            }
            continue;
          }
          if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
            return false;
          }
          i += 2;
          continue;
        }
        if (c < 0x20) {
          return false;
        }
        if (c >= 0x80) {
          if (Character.isHighSurrogate(c)) {
            if (i + 1 >= n || !Character.isLowSurrogate(s.charAt(i + 1))) {
              return false;
            }
            bytes += 2; // the pair: 4 bytes in all
            i += 2;
            continue;
          }
          if (Character.isLowSurrogate(c)) {
            return false;
          }
          bytes += c < 0x800 ? 1 : 2;
        }
        i++;
      }
      return false;
    }

    private int hex4(int at) {
      if (at + 4 > n) {
        return -1;
      }
      int v = 0;
      for (int k = at; k < at + 4; k++) {
        char c = s.charAt(k);
        int d;
        if (c >= '0' && c <= '9') {
          d = c - '0';
        } else if (c >= 'a' && c <= 'f') {
          d = c - 'a' + 10;
        } else if (c >= 'A' && c <= 'F') {
          d = c - 'A' + 10;
        } else {
          return -1;
        }
        v = v * 16 + d;
      }
      return v;
    }

    /** {@code -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?}, at most the reader's number length. */
    private boolean number() {
      int start = i;
      if (s.charAt(i) == '-') {
        i++;
      }
      if (i >= n) {
        return false;
      }
      if (s.charAt(i) == '0') {
        i++;
      } else if (!digits()) {
        return false;
      }
      if (i < n && s.charAt(i) == '.') {
        i++;
        if (!digits()) {
          return false;
        }
      }
      if (i < n && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
        i++;
        if (i < n && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
          i++;
        }
        if (!digits()) {
          return false;
        }
      }
      return i - start <= maxNumber;
    }

    /** One or more digits. */
    private boolean digits() {
      int start = i;
      while (i < n && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
        i++;
      }
      return i > start;
    }

    private boolean literal(char c) {
      String word = c == 't' ? "true" : c == 'f' ? "false" : c == 'n' ? "null" : null;
      if (word == null || !s.startsWith(word, i)) {
        return false;
      }
      i += word.length();
      return true;
    }
  }
}
