package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.pgconn.internal.spec.Ident;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The documented change events, byte for byte, from real pgoutput bytes and from a snapshot SELECT. */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ChangeEventsTest {
  Connection c;
  TypeRegistry types = new TypeRegistry();
  ChangeEvents events = new ChangeEvents(types);

  @BeforeEach
  void open(TestDatabase db) throws SQLException {
    Properties p = Values.sessionSettings();
    p.setProperty("user", db.user());
    p.setProperty("password", db.password());
    c = DriverManager.getConnection(db.jdbcUrl(), p);
    Values.apply(c);
  }

  @AfterEach
  void close() throws SQLException {
    c.close();
  }

  void sql(String... statements) throws SQLException {
    try (Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  static long micros(String instant) {
    Instant i = Instant.parse(instant);
    return i.getEpochSecond() * 1_000_000 + i.getNano() / 1000;
  }

  static SnapshotTable table(String name) {
    return new SnapshotTable("public", name, "q_" + name, List.of(), false);
  }

  PgMessage.Relation relation(List<PgMessage> ms) throws SQLException {
    var rel = DecodingSlot.of(ms, PgMessage.Relation.class).get(0);
    types.resolve(c, rel.columns().stream().map(PgMessage.Relation.Column::typeOid).toList());
    return ChangeEvents.withRowKey(c, rel);
  }

  @Test
  void theSeedsTryItEvents() throws Exception {
    sql("""
        CREATE TABLE orders (
          id         bigint PRIMARY KEY,
          customer   jsonb NOT NULL,
          status     text NOT NULL,
          total      numeric(12,2) NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now()
        )""", """
        INSERT INTO orders (id, customer, status, total, created_at) VALUES
          (1, '{"name": "Ada", "tier": "gold"}', 'new', 42.00, '2026-10-03 06:14:39.365472+00'),
          (2, '{"name": "Linus", "tier": "silver"}', 'new', 17.50, '2026-10-03 06:14:39.365472+00')""");

    // the snapshot: rows read as a chunk
    ChunkReader.Chunk chunk = ChunkReader.read(c, table("orders"), null, null, 10, (conn, shape) -> { });
    PgMessage.Relation orders = chunk.shape().relation();
    types.resolve(c, orders.columns().stream().map(PgMessage.Relation.Column::typeOid).toList());
    List<String> r = new ArrayList<>();
    List<String> partitions = new ArrayList<>();
    for (PgMessage.Tuple t : chunk.rows()) {
      r.add(events.event('r', orders, null, t, 0x1526990L, null, micros("2026-10-03T06:14:43.797508Z"), r.size())
          .json());
      partitions.add(events.partition(orders, t, null));
    }
    assertThat(r).containsExactly(
        "{\"op\":\"r\",\"table\":\"public.orders\",\"key\":{\"id\":1},\"after\":{\"id\":1,\"customer\":{\"name\":\"Ada\",\"tier\":\"gold\"},\"status\":\"new\",\"total\":42.00,\"created_at\":\"2026-10-03T06:14:39.365472+00:00\"},\"before\":null,\"lsn\":\"0/1526990\",\"ts\":\"2026-10-03T06:14:43.797508Z\",\"seq\":0}",
        "{\"op\":\"r\",\"table\":\"public.orders\",\"key\":{\"id\":2},\"after\":{\"id\":2,\"customer\":{\"name\":\"Linus\",\"tier\":\"silver\"},\"status\":\"new\",\"total\":17.50,\"created_at\":\"2026-10-03T06:14:39.365472+00:00\"},\"before\":null,\"lsn\":\"0/1526990\",\"ts\":\"2026-10-03T06:14:43.797508Z\",\"seq\":1}");
    assertThat(partitions).containsExactly("1", "2");

    // the stream
    try (DecodingSlot slot = new DecodingSlot(c, "orders")) {
      sql("UPDATE orders SET status = 'paid' WHERE id = 1");
      c.setAutoCommit(false);
      sql("INSERT INTO orders (id, customer, status, total, created_at) VALUES (3, '{\"name\": \"Grace\","
          + " \"tier\": \"gold\"}', 'new', 99.90, '2026-10-03 06:15:03.591416+00')", "DELETE FROM orders WHERE id = 2");
      c.commit();
      c.setAutoCommit(true);
      List<PgMessage> ms = slot.messages();
      PgMessage.Relation rel = relation(ms);
      assertThat(rel).isEqualTo(orders);
      List<String> got = new ArrayList<>();
      List<String> ids = new ArrayList<>();
      List<String> parts = new ArrayList<>();
      PgMessage.Begin begin = null;
      int seq = 0;
      for (PgMessage m : ms) {
        if (m instanceof PgMessage.Begin b) {
          begin = b;
          seq = 0;
        } else if (m instanceof PgMessage.Update u) {
          got.add(events.event('u', rel, u.before(), u.after(), begin.finalLsn(), begin.xid(),
              begin.commitTimeMicros(), seq).json());
          parts.add(events.partition(rel, u.after(), null));
          ids.add(MessageIds.change("00c0b669", begin.finalLsn(), seq++));
        } else if (m instanceof PgMessage.Insert i) {
          got.add(events.event('c', rel, null, i.after(), begin.finalLsn(), begin.xid(),
              begin.commitTimeMicros(), seq).json());
          parts.add(events.partition(rel, i.after(), null));
          ids.add(MessageIds.change("00c0b669", begin.finalLsn(), seq++));
        } else if (m instanceof PgMessage.Delete d) {
          got.add(events.event('d', rel, d.before(), null, begin.finalLsn(), begin.xid(),
              begin.commitTimeMicros(), seq).json());
          parts.add(events.partition(rel, d.before(), null));
          ids.add(MessageIds.change("00c0b669", begin.finalLsn(), seq++));
        }
      }
      List<PgMessage.Begin> begins = DecodingSlot.of(ms, PgMessage.Begin.class);
      String lsn1 = PgLsn.format(begins.get(0).finalLsn());
      String lsn2 = PgLsn.format(begins.get(1).finalLsn());
      String ts1 = ChangeEvents.timestamp(begins.get(0).commitTimeMicros());
      String ts2 = ChangeEvents.timestamp(begins.get(1).commitTimeMicros());
      long xid1 = begins.get(0).xid();
      long xid2 = begins.get(1).xid();
      assertThat(got).containsExactly(
          "{\"op\":\"u\",\"table\":\"public.orders\",\"key\":{\"id\":1},\"after\":{\"id\":1,\"customer\":{\"name\":\"Ada\",\"tier\":\"gold\"},\"status\":\"paid\",\"total\":42.00,\"created_at\":\"2026-10-03T06:14:39.365472+00:00\"},\"before\":null,\"lsn\":\"" + lsn1 + "\",\"xid\":" + xid1 + ",\"ts\":\"" + ts1 + "\",\"seq\":0}",
          "{\"op\":\"c\",\"table\":\"public.orders\",\"key\":{\"id\":3},\"after\":{\"id\":3,\"customer\":{\"name\":\"Grace\",\"tier\":\"gold\"},\"status\":\"new\",\"total\":99.90,\"created_at\":\"2026-10-03T06:15:03.591416+00:00\"},\"before\":null,\"lsn\":\"" + lsn2 + "\",\"xid\":" + xid2 + ",\"ts\":\"" + ts2 + "\",\"seq\":0}",
          "{\"op\":\"d\",\"table\":\"public.orders\",\"key\":{\"id\":2},\"after\":null,\"before\":{\"id\":2},\"lsn\":\"" + lsn2 + "\",\"xid\":" + xid2 + ",\"ts\":\"" + ts2 + "\",\"seq\":1}");
      assertThat(ts1).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z");
      assertThat(parts).containsExactly("1", "3", "2");
      assertThat(ids).containsExactly("pg:00c0b669:" + PgLsn.hex16(begins.get(0).finalLsn()) + ":0",
          "pg:00c0b669:" + PgLsn.hex16(begins.get(1).finalLsn()) + ":0",
          "pg:00c0b669:" + PgLsn.hex16(begins.get(1).finalLsn()) + ":1");
    }
  }

  @Test
  void unchangedToastedValuesKeyChangesAndReplicaIdentityFull() throws Exception {
    sql("CREATE TABLE big (id int PRIMARY KEY, doc text, note text)", "ALTER TABLE big ALTER doc SET STORAGE EXTERNAL",
        "INSERT INTO big VALUES (1, repeat('z', 5000), 'a')",
        "CREATE TABLE fullrow (id int PRIMARY KEY, name text, n int)", "ALTER TABLE fullrow REPLICA IDENTITY FULL",
        "INSERT INTO fullrow VALUES (1, 'a', NULL)");
    try (DecodingSlot slot = new DecodingSlot(c, "big", "fullrow")) {
      sql("UPDATE big SET note = 'b'", "UPDATE big SET id = 2", "UPDATE fullrow SET name = 'b'", "DELETE FROM fullrow");
      List<PgMessage> ms = slot.messages();
      List<PgMessage.Relation> rels = DecodingSlot.of(ms, PgMessage.Relation.class);
      types.resolve(c, List.of(23, 25));
      PgMessage.Relation big = ChangeEvents.withRowKey(c, rels.get(0));
      assertThat(big).isSameAs(rels.get(0));
      assertThat(rels.get(1).columns()).allMatch(PgMessage.Relation.Column::key); // pgoutput flags all under FULL
      PgMessage.Relation full = ChangeEvents.withRowKey(c, rels.get(1));
      assertThat(full.columns()).extracting(PgMessage.Relation.Column::key).containsExactly(true, false, false);
      assertThat(ChunkReader.shape(c, table("fullrow")).relation()).as("the snapshot's shape").isEqualTo(full);
      assertThatThrownBy(() -> ChunkReader.shape(c, table("nosuch"))).hasMessageContaining("table_missing");

      List<PgMessage.Update> us = DecodingSlot.of(ms, PgMessage.Update.class);
      assertThat(events.event('u', big, us.get(0).before(), us.get(0).after(), 0x10L, 5L, 0, 0).json())
          .isEqualTo("{\"op\":\"u\",\"table\":\"public.big\",\"key\":{\"id\":1},\"after\":{\"id\":1,\"note\":\"b\"},"
              + "\"before\":null,\"unchanged\":[\"doc\"],\"lsn\":\"0/10\",\"xid\":5,"
              + "\"ts\":\"1970-01-01T00:00:00.000000Z\",\"seq\":0}");
      assertThat(events.event('u', big, us.get(1).before(), us.get(1).after(), 0x10L, 5L, 0, 1).json())
          .isEqualTo("{\"op\":\"u\",\"table\":\"public.big\",\"key\":{\"id\":2},\"after\":{\"id\":2,\"note\":\"b\"},"
              + "\"before\":{\"id\":1},\"unchanged\":[\"doc\"],\"lsn\":\"0/10\",\"xid\":5,"
              + "\"ts\":\"1970-01-01T00:00:00.000000Z\",\"seq\":1}");
      assertThat(events.event('u', big, us.get(1).before(), us.get(1).after(), 0x10L, 5L, 0, 1).unchanged())
          .containsExactly("doc");
      assertThat(events.partition(big, us.get(1).before(), null)).isEqualTo("1");
      assertThat(events.partition(big, us.get(1).after(), null)).isEqualTo("2");
      assertThatThrownBy(() -> events.partition(big, us.get(1).after(), List.of("doc")))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("'doc'");

      assertThat(events.event('u', full, us.get(2).before(), us.get(2).after(), 1L << 32, 6L, -1, 0).json())
          .isEqualTo("{\"op\":\"u\",\"table\":\"public.fullrow\",\"key\":{\"id\":1},\"after\":{\"id\":1,\"name\":\"b\","
              + "\"n\":null},\"before\":{\"id\":1,\"name\":\"a\",\"n\":null},\"lsn\":\"1/0\",\"xid\":6,"
              + "\"ts\":\"1969-12-31T23:59:59.999999Z\",\"seq\":0}");
      var d = DecodingSlot.of(ms, PgMessage.Delete.class).get(0);
      assertThat(events.event('d', full, d.before(), null, 1L, 6L, 0, 1).json())
          .isEqualTo("{\"op\":\"d\",\"table\":\"public.fullrow\",\"key\":{\"id\":1},\"after\":null,"
              + "\"before\":{\"id\":1,\"name\":\"b\",\"n\":null},\"lsn\":\"0/1\",\"xid\":6,"
              + "\"ts\":\"1970-01-01T00:00:00.000000Z\",\"seq\":1}");
      assertThat(events.partition(full, d.before(), List.of("n"))).isEqualTo("\\N");
      assertThat(events.partition(full, d.before(), List.of("single"))).isEqualTo("all");
      assertThat(events.partition(full, d.before(), List.of("name", "id"))).isEqualTo("b|1");
      assertThatThrownBy(() -> events.partition(full, d.before(), List.of("nope")))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'nope'");
    }
  }

  @Test
  void compositeKeysWithBarsAndBackslashesAndAReplicaIdentityIndex() throws Exception {
    sql("CREATE TABLE comp (a text NOT NULL, b text NOT NULL, v int, PRIMARY KEY (a, b))",
        "CREATE TABLE byindex (id int PRIMARY KEY, code text NOT NULL, v int)",
        "CREATE UNIQUE INDEX byindex_code ON byindex (code)",
        "ALTER TABLE byindex REPLICA IDENTITY USING INDEX byindex_code");
    try (DecodingSlot slot = new DecodingSlot(c, "comp", "byindex")) {
      sql("INSERT INTO comp VALUES ('x|y', 'b\\s', 1)", "INSERT INTO comp VALUES ('" + "k".repeat(130) + "', '', 2)",
          "INSERT INTO byindex VALUES (1, 'A', 1)", "DELETE FROM byindex");
      List<PgMessage> ms = slot.messages();
      List<PgMessage.Relation> rels = DecodingSlot.of(ms, PgMessage.Relation.class);
      types.resolve(c, List.of(23, 25));
      PgMessage.Relation comp = rels.get(0);
      List<PgMessage.Insert> ins = DecodingSlot.of(ms, PgMessage.Insert.class);
      assertThat(events.partition(comp, ins.get(0).after(), null)).isEqualTo("x\\|y|b\\\\s");
      assertThat(events.partition(comp, ins.get(1).after(), null))
          .isEqualTo(PartitionKeys.of(Arrays.asList("k".repeat(130), ""))).startsWith("~").hasSize(33);
      assertThat(tree(events.event('c', comp, null, ins.get(0).after(), 0, 1L, 0, 0)).get("key").toString())
          .isEqualTo("{\"a\":\"x|y\",\"b\":\"b\\\\s\"}");

      PgMessage.Relation byIndex = rels.get(1);
      assertThat(byIndex.replicaIdentity()).isEqualTo('i');
      assertThat(ChunkReader.shape(c, table("byindex")).relation()).as("the snapshot's shape").isEqualTo(byIndex);
      var d = DecodingSlot.of(ms, PgMessage.Delete.class).get(0);
      var event = tree(events.event('d', byIndex, d.before(), null, 0, 1L, 0, 0));
      assertThat(event.get("key").toString()).isEqualTo("{\"code\":\"A\"}");
      assertThat(event.get("before").toString()).isEqualTo("{\"code\":\"A\"}");
      assertThat(events.partition(byIndex, d.before(), null)).isEqualTo("A");
    }
  }

  /** The event's text as a tree (for members without decimals: a plain mapper reads those exactly). */
  static JsonNode tree(ChangeEvents.Event e) throws Exception {
    return new ObjectMapper().readTree(e.json());
  }

  @Test
  void refusesWhatDoesNotFitTogether() {
    var rel = new PgMessage.Relation(1, "s", "t", 'd', List.of(new PgMessage.Relation.Column(true, "id", 23, -1)));
    var one = new PgMessage.Tuple(new char[] {'t'}, new String[] {"1"});
    var two = new PgMessage.Tuple(new char[] {'t', 't'}, new String[] {"1", "2"});
    assertThatThrownBy(() -> events.event('x', rel, null, one, 0, null, 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> events.event('d', rel, null, null, 0, null, 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> events.event('c', rel, null, null, 0, null, 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> events.event('c', rel, null, two, 0, null, 0, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("2 values");
    assertThat(Ident.quoteCatalogName("a\"b")).isEqualTo("\"a\"\"b\"");
  }
}
