package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.TimeZone;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Values, partitions and ids end to end through the walsender, under a JVM whose default time zone is not UTC:
 * timestamptz, numeric(30,0), a bigint above 2^53, NaN and Infinity, arrays, bytea, an enum; composite keys with
 * {@code |} and {@code \}; a key over 128 bytes; an unchanged TOASTed value; REPLICA IDENTITY FULL; {@code
 * partitionBy} "single" and a column; a key change (a d to the old partition, a c with the TOASTed value read back
 * to the new one, id {@code .1}).
 */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourceValuesTest {

  static Message one(Queen queen, String queue, SourceFixture.Reader reader, int total) {
    await().atMost(Duration.ofSeconds(20)).until(() -> reader.drain(queen, queue).total >= total);
    assertThat(reader.total).isEqualTo(total);
    List<Message> all = reader.all();
    return all.get(all.size() - 1);
  }

  @Test
  void valuesPartitionsAndIdsUnderANonUtcJvm(TestDatabase db) throws Exception {
    TimeZone saved = TimeZone.getDefault();
    TimeZone.setDefault(TimeZone.getTimeZone("Asia/Kolkata")); // +05:30: an hour-only fix would not hide a bug
    try {
      run(db);
    } finally {
      TimeZone.setDefault(saved);
    }
  }

  void run(TestDatabase db) throws Exception {
    SourceFixture f = new SourceFixture(db);
    String doc = "x".repeat(3000) + HexFormat.of().formatHex(new byte[4000]).replace("0", "y");
    f.sql("create type mood as enum ('happy', 'sad')",
        "create table vals (id bigint primary key, ts timestamptz, big numeric(30,0), huge bigint, n numeric,"
            + " f float8, arr int[], tarr text[], b bytea, m mood, doc text)",
        "alter table vals alter column doc set storage external", // TOASTed without compression
        "create table ck (a text, b text, v int, primary key (a, b))",
        "create table lk (k text primary key, v int)",
        "create table fullt (id bigint primary key, a text, b int)",
        "alter table fullt replica identity full",
        "create table single_t (id bigint primary key, v int)",
        "create table byc (id bigint primary key, region text not null, v int)",
        "alter table byc replica identity full", // a partitionBy column outside the key (SourceSetupTest)
        "alter table byc alter column region set storage external"); // a long one is TOASTed
    try (Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource())
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200)))
        .start()) {
      queen.connectors().put("vals-src", """
          {"kind": "source", "source": {"snapshot": "never", "tables": [
            {"table": "public.vals", "queue": "vals"},
            {"table": "public.ck", "queue": "ck"},
            {"table": "public.lk", "queue": "lk"},
            {"table": "public.fullt", "queue": "fullt"},
            {"table": "public.single_t", "queue": "single", "partitionBy": "single"},
            {"table": "public.byc", "queue": "byc", "partitionBy": ["region"]}]}}""");
      SourceFixture.awaitPhase(queen, "vals-src", "streaming", Duration.ofSeconds(20));

      f.sql("insert into vals values (1, '2026-10-03 08:14:39.365472+02', 123456789012345678901234567890,"
          + " 9007199254740993, 'NaN', 'Infinity', '{1,2,NULL}', '{\"a b\",\"c,d\"}', '\\x00ff', 'happy', '" + doc + "')");
      SourceFixture.Reader vals = new SourceFixture.Reader("check");
      JsonNode c = one(queen, "vals", vals, 1).payload();
      JsonNode after = c.get("after");
      assertThat(after.get("ts").asText()).isEqualTo("2026-10-03T06:14:39.365472+00:00");
      assertThat(after.get("big").isNumber()).isTrue();
      assertThat(after.get("big").toString()).isEqualTo("123456789012345678901234567890");
      assertThat(after.get("huge").toString()).isEqualTo("9007199254740993");
      assertThat(after.get("n").isTextual()).isTrue();
      assertThat(after.get("n").asText()).isEqualTo("NaN");
      assertThat(after.get("f").asText()).isEqualTo("Infinity");
      assertThat(after.get("arr").toString()).isEqualTo("[1,2,null]");
      assertThat(after.get("tarr").toString()).isEqualTo("[\"a b\",\"c,d\"]");
      assertThat(after.get("b").asText()).isEqualTo("\\x00ff");
      assertThat(after.get("m").asText()).isEqualTo("happy");
      assertThat(after.get("doc").asText()).isEqualTo(doc);
      assertThat(c.get("ts").asText()).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z");

      // a TOASTed value left unchanged: listed in unchanged, absent from after, never turned into null
      f.sql("update vals set m = 'sad' where id = 1");
      JsonNode u = one(queen, "vals", vals, 2).payload();
      assertThat(u.get("op").asText()).isEqualTo("u");
      assertThat(u.get("unchanged").toString()).isEqualTo("[\"doc\"]");
      assertThat(u.get("after").has("doc")).isFalse();
      assertThat(u.get("after").get("m").asText()).isEqualTo("sad");

      // a key change: a d to the old partition, a c to the new one with the TOASTed value read back, id .1
      f.sql("update vals set id = 2 where id = 1");
      await().atMost(Duration.ofSeconds(20)).until(() -> vals.drain(queen, "vals").total >= 4);
      assertThat(vals.total).isEqualTo(4);
      Message d = vals.byPartition.get("1").get(2);
      Message moved = vals.byPartition.get("2").get(0);
      assertThat(d.payload().get("op").asText()).isEqualTo("d");
      assertThat(d.payload().get("key").toString()).isEqualTo("{\"id\":1}");
      assertThat(moved.payload().get("op").asText()).isEqualTo("c");
      assertThat(moved.payload().get("after").get("doc").asText()).isEqualTo(doc);
      assertThat(moved.payload().has("unchanged")).isFalse();
      assertThat(moved.payload().get("lsn")).isEqualTo(d.payload().get("lsn"));
      assertThat(moved.transactionId()).isEqualTo(d.transactionId() + ".1");

      // composite keys: | and \ escaped, joined with |
      f.sql("insert into ck values ('x|y', 'z\\w', 1)");
      Message ck = one(queen, "ck", new SourceFixture.Reader("check"), 1);
      assertThat(ck.partition()).isEqualTo("x\\|y|z\\\\w");
      assertThat(ck.payload().get("key").toString()).isEqualTo("{\"a\":\"x|y\",\"b\":\"z\\\\w\"}");

      // a key over 128 bytes: ~ and the first 32 hex digits of its SHA-256
      String longKey = "k".repeat(200);
      f.sql("insert into lk values ('" + longKey + "', 1)");
      Message lk = one(queen, "lk", new SourceFixture.Reader("check"), 1);
      String hash = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
          .digest(longKey.getBytes(StandardCharsets.UTF_8))).substring(0, 32);
      assertThat(lk.partition()).isEqualTo("~" + hash);
      assertThat(lk.payload().get("key").get("k").asText()).isEqualTo(longKey);

      // REPLICA IDENTITY FULL: the whole old row in before
      f.sql("insert into fullt values (1, 'old', 7)", "update fullt set a = 'new' where id = 1");
      SourceFixture.Reader fullt = new SourceFixture.Reader("check");
      JsonNode fu = one(queen, "fullt", fullt, 2).payload();
      assertThat(fu.get("op").asText()).isEqualTo("u");
      assertThat(fu.get("before").get("a").asText()).isEqualTo("old");
      assertThat(fu.get("before").get("b").asInt()).isEqualTo(7);
      assertThat(fu.get("before").get("id").asInt()).isEqualTo(1);
      assertThat(fu.get("before").size()).isEqualTo(3);
      assertThat(fu.get("key").toString()).isEqualTo("{\"id\":1}");
      assertThat(fullt.byPartition.keySet()).containsExactly("1");

      // partitionBy "single": partition all; partitionBy a column: its value
      f.sql("insert into single_t values (1, 1), (2, 2)");
      SourceFixture.Reader single = new SourceFixture.Reader("check");
      one(queen, "single", single, 2);
      assertThat(single.byPartition.keySet()).containsExactly("all");
      f.sql("insert into byc values (1, 'eu', 1), (2, 'us', 1), (3, 'eu', 1)");
      SourceFixture.Reader byc = new SourceFixture.Reader("check");
      one(queen, "byc", byc, 3);
      assertThat(byc.byPartition.keySet()).containsExactly("eu", "us");
      assertThat(byc.byPartition.get("eu")).extracting(m -> m.payload().get("key").get("id").asInt())
          .containsExactly(1, 3);
      // a delete carries the group's old value (replica identity full), and a row that moves group is a d in
      // the old partition and a c in the new one
      f.sql("delete from byc where id = 2");
      f.sql("update byc set region = 'us' where id = 3");
      one(queen, "byc", byc, 6);
      assertThat(byc.byPartition.get("us")).extracting(m -> m.payload().get("op").asText(),
          m -> m.payload().get("key").get("id").asInt()).containsExactly(tuple("c", 2), tuple("d", 2), tuple("c", 3));
      assertThat(byc.byPartition.get("eu")).extracting(m -> m.payload().get("op").asText(),
          m -> m.payload().get("key").get("id").asInt()).containsExactly(tuple("c", 1), tuple("c", 3), tuple("d", 3));
      // an update that leaves a long (TOASTed) group value alone: the new row does not carry it, the old row
      // (replica identity full) does, so the update stays in the row's partition (a hashed name past 128 bytes)
      f.sql("insert into byc values (4, repeat('r', 3000), 1)");
      f.sql("update byc set v = 2 where id = 4");
      one(queen, "byc", byc, 8);
      String hashed = "~" + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
          .digest("r".repeat(3000).getBytes(StandardCharsets.UTF_8))).substring(0, 32);
      assertThat(byc.byPartition.get(hashed)).extracting(m -> m.payload().get("op").asText(),
          m -> m.payload().get("key").get("id").asInt()).containsExactly(tuple("c", 4), tuple("u", 4));
      // under REPLICA IDENTITY FULL unchanged is always empty, the value is in after
      JsonNode ru = byc.byPartition.get(hashed).get(1).payload();
      assertThat(ru.get("after").get("region").asText()).isEqualTo("r".repeat(3000));
      assertThat(ru.path("unchanged").size()).isZero();
    }
  }
}
