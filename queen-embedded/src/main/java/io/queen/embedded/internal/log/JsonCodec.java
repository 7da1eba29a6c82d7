package io.queen.embedded.internal.log;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.exc.InvalidDefinitionException;
import io.queen.Json;
import io.queen.PayloadSerializationException;
import java.io.IOException;
import java.io.Writer;

/**
 * Payloads and KV values to and from JSON text, with a copy of the node's {@link ObjectMapper}.
 *
 * <p>What is written is what can be read back: every text Queen stores (a {@link Json}'s text or a
 * serialised object) is checked before any SQL by a strict JSON parser that has the reader's limits,
 * plus the rules jsonb adds (no NUL, in any form; no unpaired surrogate). The reader's string limit is
 * raised to {@link #MAX_TEXT_BYTES}, the most any node may be configured to write, so a payload
 * written by one node is readable by every other, whatever its {@code maxPayloadBytes}. Messages never
 * hold the text: Jackson's own messages (which quote tokens of the input) are not passed on.
 */
public final class JsonCodec {
  /** The largest JSON text any node writes: the upper bound of {@code maxPayloadBytes} (64 MiB). */
  public static final int MAX_TEXT_BYTES = 64 * 1024 * 1024;

  private final ObjectMapper mapper;
  private final JsonFactory strict;
  private final QuickJsonCheck quick;

  /** @param userMapper the application's mapper: copied, never changed */
  public JsonCodec(ObjectMapper userMapper) {
    ObjectMapper m;
    try {
      m = userMapper.copy();
    } catch (IllegalStateException e) {
      throw new IllegalArgumentException("objectMapper: " + userMapper.getClass().getName() + " does not support copy(),"
          + " which Queen needs to raise the reader's limits without changing the application's mapper", e);
    }
    StreamReadConstraints given = m.getFactory().streamReadConstraints();
    StreamReadConstraints reader = given.rebuild()
        .maxStringLength(Math.max(given.getMaxStringLength(), MAX_TEXT_BYTES))
        .maxDocumentLength(given.hasMaxDocumentLength() ? Math.max(given.getMaxDocumentLength(), MAX_TEXT_BYTES) : -1)
        .build();
    m.getFactory().setStreamReadConstraints(reader);
    // exact numbers: 42.00 reads back as 42.00 and a numeric(30,10) keeps every digit (BigDecimal nodes that
    // keep their scale), whatever the application's mapper does; typed fields still convert (double, long)
    m.enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);
    m.configure(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES, false);
    this.mapper = m;
    // standard JSON only (what jsonb accepts), whatever leniency the application's mapper allows
    // names are only checked, never kept: no symbol table to look each one up in (a push checks every payload)
    this.strict = JsonFactory.builder().streamReadConstraints(reader)
        .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES).build();
    this.quick = new QuickJsonCheck(reader);
  }

  /** The node's mapper (a copy of the application's, with the reader limits above). */
  public ObjectMapper mapper() {
    return mapper;
  }

  /** The reader's limits, the same on both sides. */
  StreamReadConstraints constraints() {
    return mapper.getFactory().streamReadConstraints();
  }

  /**
   * JSON text ready to store, or only its size when it is over the limit.
   *
   * @param text the text, or {@code null} when {@link #bytes} is above the limit
   * @param bytes UTF-8 bytes of the text (when over the limit, of the whole text: counted, not kept)
   */
  public record Encoded(String text, long bytes) {
    public boolean tooLarge() {
      return text == null;
    }
  }

  /** The first character that is not JSON white space, or 0. */
  private static char firstNonSpace(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return c;
      }
    }
    return 0;
  }

  /**
   * Whether a String is the JSON text of an object or an array: {@code push("{\"id\":1}")} would store a JSON string,
   * which is nearly always a mistake for {@code Json.of(...)}. Only a String that starts with a brace or a bracket is
   * parsed.
   */
  private boolean holdsJsonContainer(String s, String field) {
    char first = firstNonSpace(s);
    if (first != '{' && first != '[') {
      return false;
    }
    try {
      fullCheck(s, field);
      return true;
    } catch (PayloadSerializationException notJson) {
      return false; // text that only starts like JSON: a string it is
    }
  }

  /**
   * JSON text of a payload: a {@link Json} is checked and passed through as it is; a String that holds the JSON text
   * of an object or array is refused (see {@link #holdsJsonContainer}); a {@link JsonNode}
   * or any other object is serialised. A serialised value stops being kept once it passes
   * {@code maxBytes} (its size is still counted), so an oversized object never becomes a giant string.
   *
   * @param field names the value in the error message, e.g. {@code items[3].payload}
   * @throws PayloadSerializationException the value cannot be serialised, or the text is not one valid
   *     JSON document that PostgreSQL's jsonb and Queen's reader both accept
   */
  public Encoded encode(Object value, String field, int maxBytes) {
    String text;
    long bytes;
    if (value instanceof Json j) {
      text = j.text();
      // a char is at most 3 UTF-8 bytes (a surrogate pair 4 for 2): only a text that could be over is counted here;
      // the check below counts every other one in the pass it makes anyway
      if (3L * text.length() > maxBytes) {
        bytes = utf8Length(text);
        if (bytes > maxBytes) {
          return new Encoded(null, bytes);
        }
      }
      return new Encoded(text, check(text, field));
    } else {
      if (value instanceof String s && holdsJsonContainer(s, field)) {
        throw new PayloadSerializationException(field + " is a String that holds the JSON text of an object or array,"
            + " which would be stored as one JSON string, not as that " + (firstNonSpace(s) == '{' ? "object" : "array")
            + ": pass Json.of(text) to store the JSON it holds, or a TextNode (a JsonNode) to store the text as a"
            + " string", null);
      }
      BoundedWriter w = new BoundedWriter(maxBytes);
      try {
        mapper.writeValue(w, value);
      } catch (StreamConstraintsException e) {
        throw new PayloadSerializationException(field + " is beyond the writer's limits: " + limitOf(e), null);
      } catch (InvalidDefinitionException e) {
        // a type Jackson cannot handle: the message names types and properties, never values
        throw new PayloadSerializationException(field + " cannot be serialised: " + e.getOriginalMessage(), null);
      } catch (IOException e) {
        // neither the message nor the path (map keys) is shown: either may hold data of the value
        throw new PayloadSerializationException(field + " cannot be serialised (" + e.getClass().getSimpleName()
            + "; details are not shown because they may hold data of the value)", null);
      }
      if (w.bytes > maxBytes) {
        return new Encoded(null, w.bytes);
      }
      text = w.sb.toString();
      bytes = w.bytes;
    }
    check(text, field);
    return new Encoded(text, bytes);
  }

  /**
   * Checks JSON text the way PostgreSQL's jsonb and Queen's reader will see it: exactly one standard
   * JSON document (no empty text, no trailing tokens, no second value) within the reader's limits
   * (nesting depth, number and name length), without a NUL (raw or as the escape {@code \u0000}) or an
   * unpaired surrogate.
   *
   * <p>Most texts are settled by one pass of {@link QuickJsonCheck}, which accepts only text that is certainly valid
   * and within the limits; anything else (an error, a value near a limit, deep nesting) goes through the full
   * check, which gives the verdict and its message.
   *
   * @return the text's UTF-8 length, counted in the same pass
   */
  public long check(String text, String field) {
    long settled = quick.bytes(text);
    // not certainly valid or near a limit: the full check gives the verdict and its message
    return settled >= 0 ? settled : fullCheck(text, field);
  }

  /** {@link #check} without its quick pass. */
  long fullCheck(String text, String field) {
    int n = text.length();
    long bytes = n; // one per char; the loop adds what a char takes beyond that
    for (int i = 0; i < n; i++) {
      char c = text.charAt(i);
      if (c >= 0x80) {
        bytes += c < 0x800 || Character.isSurrogate(c) ? 1 : 2;
      }
      if (c == 0) {
        throw new PayloadSerializationException(field + " holds a NUL character at position " + i
            + ", which PostgreSQL's jsonb cannot store", null);
      }
      if (c == '\\' && i + 1 < n) {
        char e = text.charAt(i + 1);
        if (e == 'u' && i + 5 < n) {
          int cp = hex4(text, i + 2);
          if (cp == 0) {
            throw new PayloadSerializationException(field + " holds the escape \\u0000 (NUL) at position " + i
                + ", which PostgreSQL's jsonb cannot store", null);
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            int low = i + 11 < n && text.charAt(i + 6) == '\\' && text.charAt(i + 7) == 'u' ? hex4(text, i + 8) : -1;
            if (low < 0xDC00 || low > 0xDFFF) {
              throw unpaired(field, i);
            }
            i += 11;
            continue;
          }
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            throw unpaired(field, i);
          }
          i += 5;
          continue;
        }
        i++; // the escaped character (so an escaped backslash before "u0000" is not an escape)
        if (text.charAt(i) >= 0x80) {
          i--; // not an escape JSON has (the parser below refuses it); counted and checked as a char of its own
        }
        continue;
      }
      if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(text.charAt(i + 1))) {
        bytes += 1; // the pair: 4 bytes in all
        i++;
      } else if (Character.isSurrogate(c)) {
        throw unpaired(field, i);
      }
    }
    try (JsonParser p = strict.createParser(text)) {
      if (p.nextToken() == null) {
        throw new PayloadSerializationException(field + " is not valid JSON: the text is empty", null);
      }
      p.skipChildren();
      if (p.nextToken() != null) {
        throw new PayloadSerializationException(field + " is not valid JSON: more than one value, or trailing text,"
            + " at " + where(p.currentTokenLocation()), null);
      }
    } catch (StreamConstraintsException e) {
      throw new PayloadSerializationException(field + " is beyond the reader's limits: " + limitOf(e), null);
    } catch (JsonProcessingException e) {
      throw new PayloadSerializationException(field + " is not valid JSON: syntax error at " + where(e.getLocation()),
          null);
    } catch (IOException e) {
      throw new PayloadSerializationException(field + " is not valid JSON (" + e.getClass().getSimpleName() + ")", null);
    }
    return bytes;
  }

  private static PayloadSerializationException unpaired(String field, int i) {
    return new PayloadSerializationException(field + " holds an unpaired UTF-16 surrogate at position " + i
        + ", which is not Unicode text and which PostgreSQL's jsonb cannot store", null);
  }

  private static int hex4(String s, int at) {
    if (at + 4 > s.length()) {
      return -1;
    }
    int v = 0;
    for (int k = at; k < at + 4; k++) {
      int d = Character.digit(s.charAt(k), 16);
      if (d < 0) {
        return -1;
      }
      v = v * 16 + d;
    }
    return v;
  }

  private static String where(JsonLocation l) {
    return l == null ? "an unknown position" : "line " + l.getLineNr() + ", column " + l.getColumnNr();
  }

  /** A constraint's message without its location (which may quote the source when a mapper enables that). */
  private static String limitOf(StreamConstraintsException e) {
    String m = e.getOriginalMessage();
    return m == null ? e.getClass().getSimpleName() : m;
  }

  /** UTF-8 length of the text, counted without encoding it. */
  public static long utf8Length(CharSequence s) {
    long bytes = 0;
    int n = s.length();
    for (int i = 0; i < n; i++) {
      bytes += utf8(s.charAt(i));
    }
    return bytes;
  }

  private static int utf8(char c) {
    if (c < 0x80) {
      return 1;
    }
    if (c < 0x800 || Character.isSurrogate(c)) {
      return 2; // a surrogate pair is 4 bytes
    }
    return 3;
  }

  /** Parses JSON text read from the database. */
  public JsonNode parse(String text) {
    if (text == null) {
      return null;
    }
    try {
      return mapper.readTree(text);
    } catch (StreamConstraintsException e) {
      throw new PayloadSerializationException("stored JSON of " + utf8Length(text)
          + " bytes is beyond the reader's limits: " + limitOf(e), null);
    } catch (JsonProcessingException e) {
      throw new PayloadSerializationException("stored JSON of " + utf8Length(text)
          + " bytes cannot be parsed: syntax error at " + where(e.getLocation()), null);
    }
  }

  /** Collects serialised text up to a byte limit, and past it only counts. */
  private static final class BoundedWriter extends Writer {
    private final long max;
    private StringBuilder sb = new StringBuilder(256);
    long bytes;

    BoundedWriter(long max) {
      this.max = max;
    }

    @Override
    public void write(char[] cbuf, int off, int len) {
      for (int k = off; k < off + len; k++) {
        bytes += utf8(cbuf[k]);
      }
      if (keep()) {
        sb.append(cbuf, off, len);
      }
    }

    @Override
    public void write(String str, int off, int len) {
      for (int k = off; k < off + len; k++) {
        bytes += utf8(str.charAt(k));
      }
      if (keep()) {
        sb.append(str, off, off + len);
      }
    }

    @Override
    public void write(int c) {
      bytes += utf8((char) c);
      if (keep()) {
        sb.append((char) c);
      }
    }

    /** Whether to keep what was just counted: false from the moment the total passes the limit. */
    private boolean keep() {
      if (sb != null && bytes > max) {
        sb = null; // over the limit: count the rest, keep nothing
      }
      return sb != null;
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}
  }
}
