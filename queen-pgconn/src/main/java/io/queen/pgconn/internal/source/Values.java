package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.BooleanNode;
import com.fasterxml.jackson.databind.node.NumericNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.LongNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.TextNode;
import com.fasterxml.jackson.databind.node.ValueNode;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * PostgreSQL's text output of a value to the JSON of a change event (the seed's "The change events"), the same
 * for the stream (pgoutput text) and the snapshot ({@code getString} on a text-format result), provided both
 * sessions run with {@link #SETTINGS}:
 *
 * <ul>
 *   <li>bool: {@code true}/{@code false};
 *   <li>integers, numeric, float4 and float8: JSON numbers written with exactly the digits PostgreSQL printed
 *       (never through a double: {@code 42.00}, a 30-digit numeric, a bigint above 2^53 and a float8's
 *       shortest exact form stay as printed); {@code NaN}, {@code Infinity}, {@code -Infinity}: strings;
 *   <li>json and jsonb: embedded, with exact decimals;
 *   <li>timestamptz: {@code 2026-10-03T06:14:39.365472+00:00}; timestamp: {@code 2026-10-03T06:14:39.365472};
 *       {@code infinity}, {@code -infinity} and BC dates: the string as printed;
 *   <li>arrays of built-in types: JSON arrays (nested for more dimensions), each element by its type's rule;
 *       an array with explicit bounds ({@code [0:1]={...}}) or of other types: the string as printed;
 *   <li>bytea ({@code \x...}) and everything else: the string as printed.
 * </ul>
 *
 * Stateless and thread-safe.
 */
final class Values {
  /**
   * What both the walsender and the snapshot session must run with so they print identically, whatever the
   * JVM's zone or the role's and database's defaults.
   */
  static final Map<String, String> SETTINGS = Collections.unmodifiableMap(settings());

  private static Map<String, String> settings() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("TimeZone", "UTC");
    m.put("DateStyle", "ISO");
    m.put("IntervalStyle", "postgres");
    m.put("bytea_output", "hex");
    m.put("extra_float_digits", "1");
    return m;
  }

  private static final Pattern TIMESTAMPTZ = Pattern.compile(
      "(\\d{4,}-\\d\\d-\\d\\d) (\\d\\d:\\d\\d:\\d\\d(?:\\.\\d{1,6})?)([+-]\\d\\d)(:\\d\\d)?(:\\d\\d)?");
  private static final Pattern TIMESTAMP = Pattern.compile("(\\d{4,}-\\d\\d-\\d\\d) (\\d\\d:\\d\\d:\\d\\d(?:\\.\\d{1,6})?)");
  private static final Pattern NUMBER = Pattern.compile("-?\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?");

  /** Parses json/jsonb text with every decimal kept as written (scale included), no double in between. */
  private static final ObjectMapper JSON = JsonMapper.builder()
      .nodeFactory(new ExactNodeFactory())
      .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .disable(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES)
      .disable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
      .build();

  static {
    // jsonb holds numbers of up to 131,072 digits and values of up to 255 MB; nesting is bounded by the server
    JSON.getFactory().setStreamReadConstraints(StreamReadConstraints.builder()
        .maxNumberLength(200_000).maxStringLength(Integer.MAX_VALUE).maxNestingDepth(10_000).build());
  }

  private Values() {}

  /**
   * The pgjdbc connection properties for a session whose values are read as text: {@code options} carrying
   * {@link #SETTINGS} (as {@code -c name=value}) and {@code binaryTransfer=false}, because a binary result
   * makes {@code getString} format a value in the JVM instead of printing it as PostgreSQL does. pgjdbc's
   * startup packet sets {@code TimeZone} to the JVM's zone (and {@code extra_float_digits}), which overrides
   * {@code options}, and a login event trigger can change settings after that: call {@link #apply} after
   * connecting; these properties alone are not enough.
   */
  static Properties sessionSettings() {
    Properties p = new Properties();
    StringBuilder options = new StringBuilder();
    for (Map.Entry<String, String> e : SETTINGS.entrySet()) {
      options.append(options.isEmpty() ? "" : " ").append("-c ").append(e.getKey()).append('=').append(e.getValue());
    }
    p.setProperty("options", options.toString());
    p.setProperty("binaryTransfer", "false");
    return p;
  }

  /**
   * SETs {@link #SETTINGS} on an open session (a normal connection, or a replication connection before
   * {@code START_REPLICATION}: the walsender runs these in the simple query protocol too). Session-level, so
   * the caller must not run it inside a transaction it later rolls back.
   */
  static void apply(Connection c) throws SQLException {
    try (Statement st = c.createStatement()) {
      for (Map.Entry<String, String> e : SETTINGS.entrySet()) {
        st.execute("SET " + e.getKey() + " = '" + e.getValue() + "'");
      }
    }
  }

  /**
   * The JSON of one value printed by PostgreSQL ({@code text} null gives JSON null).
   *
   * @param typeOid the column's type, resolved through {@code types} for non-built-ins
   */
  static JsonNode render(TypeRegistry types, int typeOid, String text) {
    if (text == null) {
      return NullNode.instance;
    }
    TypeRegistry.Kind kind = types.kind(typeOid);
    if (kind == TypeRegistry.Kind.ARRAY) {
      if (text.isEmpty() || text.charAt(0) != '{') {
        return TextNode.valueOf(text); // explicit bounds [0:1]={...}: keep the bounds, as printed
      }
      JsonNode parsed = new ArrayParser(text, types.elementKind(typeOid)).parse();
      return parsed != null ? parsed : TextNode.valueOf(text);
    }
    return scalar(kind, text);
  }

  /** One value of a non-array kind (an array's element too). */
  static JsonNode scalar(TypeRegistry.Kind kind, String text) {
    switch (kind) {
      case BOOL:
        if (text.equals("t")) {
          return BooleanNode.TRUE;
        }
        return text.equals("f") ? BooleanNode.FALSE : TextNode.valueOf(text);
      case INTEGER:
        return integer(text);
      case NUMERIC:
      case FLOAT:
        return NUMBER.matcher(text).matches() ? new PrintedNumber(text) : TextNode.valueOf(text);
      case JSON:
        return json(text);
      case TIMESTAMPTZ:
        return timestamptz(text);
      case TIMESTAMP: {
        Matcher m = TIMESTAMP.matcher(text);
        return TextNode.valueOf(m.matches() ? m.group(1) + 'T' + m.group(2) : text);
      }
      default:
        return TextNode.valueOf(text);
    }
  }

  private static JsonNode integer(String text) {
    try {
      return LongNode.valueOf(Long.parseLong(text));
    } catch (NumberFormatException e) {
      return NUMBER.matcher(text).matches() ? new PrintedNumber(text) : TextNode.valueOf(text);
    }
  }

  private static JsonNode json(String text) {
    try {
      return JSON.readTree(text);
    } catch (JsonProcessingException e) {
      // PostgreSQL validated it; only a value beyond the parser's limits gets here: keep it, as printed
      return TextNode.valueOf(text);
    }
  }

  private static JsonNode timestamptz(String text) {
    Matcher m = TIMESTAMPTZ.matcher(text);
    if (!m.matches()) {
      return TextNode.valueOf(text); // infinity, -infinity, BC
    }
    String minutes = m.group(4) == null ? ":00" : m.group(4);
    String seconds = m.group(5) == null ? "" : m.group(5);
    return TextNode.valueOf(m.group(1) + 'T' + m.group(2) + m.group(3) + minutes + seconds);
  }

  /**
   * A JSON number written with exactly the characters PostgreSQL printed ({@code 42.00}, {@code 1e+20},
   * {@code 0.0000001}), where a {@code DecimalNode} would write {@code 1E-7} unless the writer is configured
   * otherwise. Its value is the BigDecimal of that text; two are equal when they print the same.
   */
  static final class PrintedNumber extends NumericNode {
    private static final long serialVersionUID = 1L;
    private final String printed;
    private final BigDecimal value;

    PrintedNumber(String printed) {
      this.value = new BigDecimal(printed);
      this.printed = printed;
    }

    @Override
    public void serialize(JsonGenerator g, SerializerProvider provider) throws IOException {
      g.writeNumber(printed);
    }

    @Override
    public JsonToken asToken() {
      return integral() ? JsonToken.VALUE_NUMBER_INT : JsonToken.VALUE_NUMBER_FLOAT;
    }

    private boolean integral() {
      for (int i = 0; i < printed.length(); i++) {
        char c = printed.charAt(i);
        if (c == '.' || c == 'e' || c == 'E') {
          return false;
        }
      }
      return true;
    }

    @Override
    public JsonParser.NumberType numberType() {
      return JsonParser.NumberType.BIG_DECIMAL;
    }

    @Override
    public boolean isBigDecimal() {
      return true;
    }

    @Override
    public boolean isFloatingPointNumber() {
      return true;
    }

    @Override
    public Number numberValue() {
      return value;
    }

    @Override
    public int intValue() {
      return value.intValue();
    }

    @Override
    public long longValue() {
      return value.longValue();
    }

    @Override
    public double doubleValue() {
      return value.doubleValue();
    }

    @Override
    public BigDecimal decimalValue() {
      return value;
    }

    @Override
    public BigInteger bigIntegerValue() {
      return value.toBigInteger();
    }

    @Override
    public boolean canConvertToInt() {
      return value.compareTo(BigDecimal.valueOf(Integer.MIN_VALUE)) >= 0
          && value.compareTo(BigDecimal.valueOf(Integer.MAX_VALUE)) <= 0;
    }

    @Override
    public boolean canConvertToLong() {
      return value.compareTo(BigDecimal.valueOf(Long.MIN_VALUE)) >= 0
          && value.compareTo(BigDecimal.valueOf(Long.MAX_VALUE)) <= 0;
    }

    @Override
    public String asText() {
      return printed;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof PrintedNumber p && p.printed.equals(printed);
    }

    @Override
    public int hashCode() {
      return printed.hashCode();
    }
  }

  /** Builds json/jsonb decimals as {@link PrintedNumber}s in plain notation, so their digits survive. */
  private static final class ExactNodeFactory extends JsonNodeFactory {
    private static final long serialVersionUID = 1L;

    ExactNodeFactory() {
      super(true);
    }

    @Override
    public ValueNode numberNode(BigDecimal v) {
      return v == null ? nullNode() : new PrintedNumber(v.toPlainString());
    }
  }

  /**
   * PostgreSQL's array output: {@code {a,b}}, nested braces per dimension, elements in double quotes when they
   * hold a delimiter, brace, quote, backslash or space or are empty or {@code NULL} (with {@code \} escaping
   * {@code "} and {@code \}), an unquoted {@code NULL} for a null element. Returns null for anything else,
   * and the caller keeps the text.
   */
  private static final class ArrayParser {
    private final String s;
    private final TypeRegistry.Kind element;
    private int i;

    ArrayParser(String s, TypeRegistry.Kind element) {
      this.s = s;
      this.element = element;
    }

    JsonNode parse() {
      ArrayNode a = level();
      return a != null && i == s.length() ? a : null;
    }

    private ArrayNode level() {
      if (i >= s.length() || s.charAt(i) != '{') {
        return null;
      }
      i++;
      ArrayNode out = JsonNodeFactory.instance.arrayNode();
      if (i < s.length() && s.charAt(i) == '}') {
        i++;
        return out;
      }
      while (i < s.length()) {
        char c = s.charAt(i);
        if (c == '{') {
          ArrayNode inner = level();
          if (inner == null) {
            return null;
          }
          out.add(inner);
        } else if (c == '"') {
          String v = quoted();
          if (v == null) {
            return null;
          }
          out.add(scalar(element, v));
        } else {
          int start = i;
          while (i < s.length() && s.charAt(i) != ',' && s.charAt(i) != '}') {
            char d = s.charAt(i);
            if (d == '"' || d == '{' || d == '\\') {
              return null;
            }
            i++;
          }
          String v = s.substring(start, i);
          if (v.isEmpty()) {
            return null;
          }
          out.add(v.equals("NULL") ? NullNode.instance : scalar(element, v));
        }
        if (i >= s.length()) {
          return null;
        }
        char sep = s.charAt(i++);
        if (sep == '}') {
          return out;
        }
        if (sep != ',') {
          return null;
        }
      }
      return null;
    }

    private String quoted() {
      StringBuilder b = new StringBuilder();
      i++;
      while (i < s.length()) {
        char c = s.charAt(i++);
        if (c == '"') {
          return b.toString();
        }
        if (c == '\\') {
          if (i >= s.length()) {
            return null;
          }
          c = s.charAt(i++);
        }
        b.append(c);
      }
      return null;
    }
  }
}
