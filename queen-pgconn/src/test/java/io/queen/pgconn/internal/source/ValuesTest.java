package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TimeZone;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every value rule through the real path: a row written, decoded from pgoutput bytes, rendered; and the same
 * row read as the snapshot reads a chunk ({@link ChunkReader#read}), rendered identically. The JVM runs in a
 * zone that is not UTC and the kit's login trigger sets yet another one on every session.
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ValuesTest {
  TimeZone saved;
  Connection c;
  TypeRegistry types = new TypeRegistry();

  @BeforeEach
  void open(TestDatabase db) throws SQLException {
    saved = TimeZone.getDefault();
    TimeZone.setDefault(TimeZone.getTimeZone("Asia/Kolkata"));
    Properties p = Values.sessionSettings();
    p.setProperty("user", db.user());
    p.setProperty("password", db.password());
    c = DriverManager.getConnection(db.jdbcUrl(), p);
  }

  @AfterEach
  void close() throws SQLException {
    TimeZone.setDefault(saved);
    c.close();
  }

  String show(String setting) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SHOW " + setting)) {
      rs.next();
      return rs.getString(1);
    }
  }

  void sql(String... statements) throws SQLException {
    try (Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  @Test
  void applyWinsOverTheStartupPacketAndTheLoginTrigger() throws SQLException {
    // pgjdbc sends the JVM's zone as TimeZone in the startup packet, overriding options=-c TimeZone=UTC,
    // and the kit's login trigger then sets America/Sao_Paulo: neither is UTC
    assertThat(show("TimeZone")).isNotEqualTo("UTC");
    Values.apply(c);
    assertThat(show("TimeZone")).isEqualTo("UTC");
    assertThat(show("DateStyle")).startsWith("ISO");
    assertThat(show("IntervalStyle")).isEqualTo("postgres");
    assertThat(show("bytea_output")).isEqualTo("hex");
    assertThat(show("extra_float_digits")).isEqualTo("1");
  }

  /** Column, SQL literal, expected JSON. */
  static final String[][] CASES = {
      {"b bool", "true", "true"},
      {"i2 int2", "-32768", "-32768"},
      {"i8 int8", "9007199254740993", "9007199254740993"},
      {"o oid", "4294967295", "4294967295"},
      {"n30 numeric(30,0)", "123456789012345678901234567890", "123456789012345678901234567890"},
      {"n12 numeric(12,2)", "42", "42.00"},
      {"nneg numeric", "-0.5", "-0.5"},
      {"tiny numeric", "0.0000001", "0.0000001"},
      {"nnan numeric", "'NaN'", "\"NaN\""},
      {"ninf numeric", "'Infinity'", "\"Infinity\""},
      {"nminf numeric", "'-Infinity'", "\"-Infinity\""},
      {"f4 float4", "0.1", "0.1"},
      {"f8 float8", "0.1::float8 + 0.2::float8", "0.30000000000000004"},
      {"f8big float8", "1e20", "1e+20"},
      {"f8inf float8", "'Infinity'", "\"Infinity\""},
      {"f8minf float8", "'-Infinity'", "\"-Infinity\""},
      {"f8nan float8", "'NaN'", "\"NaN\""},
      {"js json", "'{\"a\": 1.50, \"b\": [1, 2.0, null], \"c\": {\"d\": \"x\"}, \"e\": 1e-7}'",
          "{\"a\":1.50,\"b\":[1,2.0,null],\"c\":{\"d\":\"x\"},\"e\":1e-7}"}, // as written; jsonb reads 1e-7 exactly
      {"jb jsonb", "'{\"nested\": {\"arr\": [1, {\"x\": true}], \"s\": \"é\"}, \"n\": 42.00,"
          + " \"big\": 123456789012345678901234567890}'",
          "{\"n\":42.00,\"big\":123456789012345678901234567890,\"nested\":{\"s\":\"é\",\"arr\":[1,{\"x\":true}]}}"},
      {"tz timestamptz", "'2026-10-03 06:14:39.365472+00'", "\"2026-10-03T06:14:39.365472+00:00\""},
      {"tzoff timestamptz", "'2026-10-03 11:44:39.5+05:30'", "\"2026-10-03T06:14:39.5+00:00\""},
      {"tzinf timestamptz", "'infinity'", "\"infinity\""},
      {"tzminf timestamptz", "'-infinity'", "\"-infinity\""},
      {"tzbc timestamptz", "'0044-03-15 12:00:00+00 BC'", "\"0044-03-15 12:00:00+00 BC\""},
      {"ts timestamp", "'2026-10-03 06:14:39.365472'", "\"2026-10-03T06:14:39.365472\""},
      {"tsbc timestamp", "'0044-03-15 12:00:00 BC'", "\"0044-03-15 12:00:00 BC\""},
      {"ta text[]", "ARRAY['a,b', 'say \"hi\"', NULL, 'back\\slash', '', 'NULL', ' sp', '{x}']",
          "[\"a,b\",\"say \\\"hi\\\"\",null,\"back\\\\slash\",\"\",\"NULL\",\" sp\",\"{x}\"]"},
      {"ia int[]", "'{1,2,3}'", "[1,2,3]"},
      {"i2d int[][]", "'{{1,2},{3,4}}'", "[[1,2],[3,4]]"},
      {"iempty int[]", "'{}'", "[]"},
      {"bnd int[]", "'[0:1]={5,6}'", "\"[0:1]={5,6}\""},
      {"bools bool[]", "'{t,f,NULL}'", "[true,false,null]"},
      {"nums numeric[]", "'{1.10,NaN,-Infinity}'", "[1.10,\"NaN\",\"-Infinity\"]"},
      {"tzs timestamptz[]", "ARRAY['2026-10-03 06:14:39.5+00'::timestamptz]", "[\"2026-10-03T06:14:39.5+00:00\"]"},
      {"jbs jsonb[]", "ARRAY['{\"a\": 1}'::jsonb, 'null'::jsonb]", "[{\"a\":1},null]"},
      {"ba bytea", "'\\x00ff10'::bytea", "\"\\\\x00ff10\""},
      {"m mood", "'happy'", "\"happy\""},
      {"ms mood[]", "'{sad,happy}'", "\"{sad,happy}\""},
      {"u uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "\"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\""},
      {"iv interval", "'1 day 2 hours 3 minutes 4.5 seconds'", "\"1 day 02:03:04.5\""},
      {"ip inet", "'192.168.0.1/24'", "\"192.168.0.1/24\""},
      {"amount amount", "12.5", "12.50"},
      {"amounts amount[]", "'{1.5,NULL}'", "[1.50,null]"},
      {"big bigger", "9007199254740993", "9007199254740993"},
      {"c pair", "ROW(1, 'x y')", "\"(1,\\\"x y\\\")\""},
      {"dt date", "'2026-10-03'", "\"2026-10-03\""},
      {"tm timetz", "'06:14:39+02'", "\"06:14:39+02\""},
      {"r tstzrange", "tstzrange('2026-01-01 00:00+00', '2026-02-01 00:00+00')",
          "\"[\\\"2026-01-01 00:00:00+00\\\",\\\"2026-02-01 00:00:00+00\\\")\""},
      {"ch char(4)", "'ab'", "\"ab  \""},
      {"nul text", "NULL", "null"},
  };

  @Test
  void everyRuleThroughPgoutputAndThroughSelectAlike() throws Exception {
    Values.apply(c);
    StringBuilder ddl = new StringBuilder("CREATE TABLE v (id int PRIMARY KEY");
    StringBuilder insert = new StringBuilder("INSERT INTO v VALUES (1");
    StringBuilder expected = new StringBuilder("{\"id\":1");
    for (String[] k : CASES) {
      ddl.append(", ").append(k[0]);
      insert.append(", ").append(k[1]);
      expected.append(",\"").append(k[0].substring(0, k[0].indexOf(' '))).append("\":").append(k[2]);
    }
    sql("CREATE TYPE mood AS ENUM ('sad', 'happy')", "CREATE TYPE pair AS (a int, b text)",
        "CREATE DOMAIN amount AS numeric(12,2)", "CREATE DOMAIN big AS int8", "CREATE DOMAIN bigger AS big",
        ddl.append(")").toString());
    try (DecodingSlot slot = new DecodingSlot(c, "v")) {
      sql(insert.append(")").toString());
      List<PgMessage> ms = slot.messages();
      var rel = DecodingSlot.of(ms, PgMessage.Relation.class).get(0);
      for (PgMessage.Type t : DecodingSlot.of(ms, PgMessage.Type.class)) {
        types.learn(t);
      }
      types.resolve(c, rel.columns().stream().map(PgMessage.Relation.Column::typeOid).toList());
      var begin = DecodingSlot.of(ms, PgMessage.Begin.class).get(0);
      var ins = DecodingSlot.of(ms, PgMessage.Insert.class).get(0);
      ChangeEvents events = new ChangeEvents(types);
      var c1 = events.event('c', rel, null, ins.after(), begin.finalLsn(), begin.xid(), begin.commitTimeMicros(), 0);
      String after = member(c1.json(), "after");
      expected.append("}");
      Map<String, String> got = fields(after);
      Map<String, String> want = fields(expected.toString());
      assertThat(got).containsExactlyEntriesOf(want);
      assertThat(after).isEqualTo(expected.toString());

      // the snapshot's way: a chunk read as the snapshot reads it, more often than pgjdbc's prepareThreshold
      SnapshotTable table = new SnapshotTable("public", "v", "q_v", List.of(), false);
      for (int round = 0; round < 7; round++) {
        ChunkReader.Chunk chunk = ChunkReader.read(c, table, null, null, 10, (conn, shape) -> { });
        PgMessage.Relation fromCatalog = chunk.shape().relation();
        assertThat(fromCatalog).isEqualTo(rel);
        assertThat(chunk.rows()).hasSize(1);
        PgMessage.Tuple t = chunk.rows().get(0);
        var r = events.event('r', fromCatalog, null, t, begin.finalLsn(), null, begin.commitTimeMicros(), 0);
        assertThat(member(r.json(), "after")).as("round " + round).isEqualTo(after);
        assertThat(t.texts()).containsExactly(ins.after().texts());
      }
    }
  }

  /** The text of a top-level member's value, as written. */
  static String member(String json, String name) throws Exception {
    String m = fields(json).get(name);
    return m.substring(m.indexOf(':') + 1);
  }

  /** Splits a JSON object into its top-level members ({@code "name":value} each, as written), for a readable diff. */
  static Map<String, String> fields(String json) throws Exception {
    var node = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json);
    Map<String, String> out = new LinkedHashMap<>();
    // re-render each member from the original text: find by name in order
    node.fieldNames().forEachRemaining(n -> out.put(n, null));
    int depth = 0;
    boolean inString = false;
    int start = 1;
    List<String> names = List.copyOf(out.keySet());
    int idx = 0;
    for (int i = 1; i < json.length() - 1; i++) {
      char ch = json.charAt(i);
      if (inString) {
        if (ch == '\\') {
          i++;
        } else if (ch == '"') {
          inString = false;
        }
      } else if (ch == '"') {
        inString = true;
      } else if (ch == '{' || ch == '[') {
        depth++;
      } else if (ch == '}' || ch == ']') {
        depth--;
      } else if (ch == ',' && depth == 0) {
        out.put(names.get(idx++), json.substring(start, i));
        start = i + 1;
      }
    }
    out.put(names.get(idx), json.substring(start, json.length() - 1));
    return out;
  }

  @Test
  void offsetsAndFormsTheWalsenderCouldPrint() {
    TypeRegistry t = new TypeRegistry();
    assertThat(Values.text(t, 1184, "2026-10-03 11:44:39.365472+05:30")).isEqualTo("\"2026-10-03T11:44:39.365472+05:30\"");
    assertThat(Values.text(t, 1184, "1900-01-01 00:00:00-03:06:28")).isEqualTo("\"1900-01-01T00:00:00-03:06:28\"");
    assertThat(Values.text(t, 1184, "2026-10-03 06:14:39-03")).isEqualTo("\"2026-10-03T06:14:39-03:00\"");
    assertThat(Values.text(t, 1184, "12345-01-01 00:00:00+00")).isEqualTo("\"12345-01-01T00:00:00+00:00\"");
    assertThat(Values.text(t, 1114, "infinity")).isEqualTo("\"infinity\"");
    assertThat(Values.text(t, 16, null)).isEqualTo("null");
    assertThat(Values.text(t, 1007, "{{1,2},{3}")).isEqualTo("\"{{1,2},{3}\""); // malformed: as printed
    assertThat(Values.text(t, 1009, "{\"a\\\"b\",c}")).isEqualTo("[\"a\\\"b\",\"c\"]");
    assertThat(Values.text(t, 99999, "whatever")).isEqualTo("\"whatever\""); // never resolved
    // json as printed, without the whitespace between tokens; strings (spaces, escapes) kept as they are
    assertThat(Values.text(t, 114, " { \"a b\" : [ 1 , \"x \\\" } y\" ] ,\n\"c\":\t-1.50e+3 } "))
        .isEqualTo("{\"a b\":[1,\"x \\\" } y\"],\"c\":-1.50e+3}");
    // beyond what a reader takes as JSON: the string PostgreSQL printed
    String deep = "[".repeat(10_001) + "]".repeat(10_001);
    assertThat(Values.text(t, 3802, deep)).isEqualTo("\"" + deep + "\"");
    assertThat(Values.text(t, 3802, "[" + "[".repeat(9_999) + "]".repeat(9_999) + "]")).startsWith("[[").endsWith("]]");
    String longNumber = "1".repeat(200_001);
    assertThat(Values.text(t, 3802, "[" + longNumber + "]")).isEqualTo("\"[" + longNumber + "]\"");
    String longName = "{\"" + "k".repeat(50_001) + "\": 1}";
    assertThat(Values.text(t, 3802, longName)).startsWith("\"{\\\"kkk"); // a name the reader refuses: as printed
    String name = "{\"" + "k".repeat(50_000) + "\" : \"" + "v".repeat(60_000) + "\"}";
    assertThat(Values.text(t, 3802, name)).isEqualTo(name.replace(" ", "")); // long values are fine
    assertThat(Values.text(t, 1700, "1e+20")).isEqualTo("1e+20");
    assertThat(Values.text(t, 1700, "007x")).isEqualTo("\"007x\"");
    assertThat(Values.text(t, 20, "-9223372036854775808")).isEqualTo("-9223372036854775808");
    assertThat(Values.text(t, 1114, "2026-10-03 06:14:39.1234567")).isEqualTo("\"2026-10-03 06:14:39.1234567\"");
    assertThat(Values.text(t, 1184, "2026-10-03 06:14:39+0")).isEqualTo("\"2026-10-03 06:14:39+0\"");
  }

  /** Strings are escaped exactly as Jackson escapes them, so an event reads as Jackson would write it. */
  @Test
  void stringsAreEscapedAsJacksonEscapesThem() throws Exception {
    ObjectMapper jackson = new ObjectMapper();
    StringBuilder all = new StringBuilder();
    for (char ch = 0; ch < 0x100; ch++) {
      all.append(ch);
    }
    all.append("\u20ac\ud83d\ude00\u2028/");
    for (String s : List.of(all.toString(), "", "plain", "\"\\", "tab\there")) {
      StringBuilder b = new StringBuilder();
      Values.string(b, s);
      assertThat(b.toString()).isEqualTo(jackson.writeValueAsString(s));
    }
  }
}
