package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Real pgoutput bytes from PostgreSQL (a slot read with SQL), decoded and checked field by field. */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PgOutputDecoderTest {
  static final int INT4 = 23;
  static final int INT8 = 20;
  static final int TEXT = 25;
  static final int NUMERIC = 1700;

  Connection c;

  @BeforeEach
  void open(TestDatabase db) throws SQLException {
    c = db.connection();
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

  long one(String query) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  static long nowMicros() {
    return System.currentTimeMillis() * 1000;
  }

  @Test
  void insertUpdateDeleteWithAnUnchangedToastedValueAndAKeyChange() throws Exception {
    sql("CREATE TABLE t1 (id int PRIMARY KEY, name text, big text, total numeric(12,2))",
        "ALTER TABLE t1 ALTER big SET STORAGE EXTERNAL");
    try (DecodingSlot slot = new DecodingSlot(c, "t1")) {
      long relOid = one("SELECT 't1'::regclass::oid");
      long t0 = nowMicros();
      c.setAutoCommit(false);
      long xid = one("SELECT pg_current_xact_id()::text::bigint");
      sql("INSERT INTO t1 VALUES (1, 'Ada', repeat(md5('x'), 100), 42.00)");
      c.commit();
      c.setAutoCommit(true);
      long t1 = nowMicros();
      sql("UPDATE t1 SET name = 'Ada L.' WHERE id = 1", "UPDATE t1 SET id = 2 WHERE id = 1",
          "DELETE FROM t1 WHERE id = 2");

      List<DecodingSlot.Row> rows = slot.read();
      List<PgMessage> ms = rows.stream().map(DecodingSlot.Row::message).toList();
      assertThat(ms).extracting(m -> m.getClass().getSimpleName()).containsExactly(
          "Begin", "Relation", "Insert", "Commit", // a relation is described once per decoding session
          "Begin", "Update", "Commit",
          "Begin", "Update", "Commit",
          "Begin", "Delete", "Commit");

      var begin = (PgMessage.Begin) ms.get(0);
      var commit = (PgMessage.Commit) ms.get(3);
      assertThat(begin.xid()).isEqualTo(xid).isEqualTo(rows.get(0).xid());
      assertThat(begin.finalLsn()).isEqualTo(commit.commitLsn());
      assertThat(commit.endLsn()).isEqualTo(rows.get(3).lsn());
      assertThat(Long.compareUnsigned(commit.commitLsn(), commit.endLsn())).isNegative();
      assertThat(begin.commitTimeMicros()).isEqualTo(commit.commitTimeMicros()).isBetween(t0 - 1_000_000, t1 + 1_000_000);

      var rel = (PgMessage.Relation) ms.get(1);
      assertThat(rel.oid()).isEqualTo((int) relOid);
      assertThat(rel.schema()).isEqualTo("public");
      assertThat(rel.name()).isEqualTo("t1");
      assertThat(rel.replicaIdentity()).isEqualTo('d');
      assertThat(rel.columns()).containsExactly(
          new PgMessage.Relation.Column(true, "id", INT4, -1),
          new PgMessage.Relation.Column(false, "name", TEXT, -1),
          new PgMessage.Relation.Column(false, "big", TEXT, -1),
          new PgMessage.Relation.Column(false, "total", NUMERIC, (12 << 16 | 2) + 4));

      String big = "9dd4e461268c8034f5c8564e155c67a6".repeat(100);
      var insert = (PgMessage.Insert) ms.get(2);
      assertThat(insert.relationOid()).isEqualTo((int) relOid);
      assertThat(insert.after().kinds()).containsExactly('t', 't', 't', 't');
      assertThat(insert.after().texts()).containsExactly("1", "Ada", big, "42.00");

      var update = (PgMessage.Update) ms.get(5);
      assertThat(update.oldKind()).isEqualTo((char) 0);
      assertThat(update.before()).isNull();
      assertThat(update.after().kinds()).containsExactly('t', 't', 'u', 't');
      assertThat(update.after().texts()).containsExactly("1", "Ada L.", null, "42.00");

      var keyChange = (PgMessage.Update) ms.get(8);
      assertThat(keyChange.oldKind()).isEqualTo('K');
      assertThat(keyChange.before().kinds()).containsExactly('t', 'n', 'n', 'n');
      assertThat(keyChange.before().texts()).containsExactly("1", null, null, null);
      assertThat(keyChange.after().kinds()).containsExactly('t', 't', 'u', 't');
      assertThat(keyChange.after().texts()).containsExactly("2", "Ada L.", null, "42.00");

      var delete = (PgMessage.Delete) ms.get(11);
      assertThat(delete.oldKind()).isEqualTo('K');
      assertThat(delete.before().kinds()).containsExactly('t', 'n', 'n', 'n');
      assertThat(delete.before().texts()).containsExactly("2", null, null, null);
      var lastBegin = (PgMessage.Begin) ms.get(10);
      assertThat(lastBegin.xid()).isEqualTo(rows.get(11).xid());
    }
  }

  @Test
  void replicaIdentityFullSendsTheWholeOldRow() throws Exception {
    sql("CREATE TABLE t2 (id bigint PRIMARY KEY, name text, n int)", "ALTER TABLE t2 REPLICA IDENTITY FULL",
        "INSERT INTO t2 VALUES (10, 'a', NULL)");
    try (DecodingSlot slot = new DecodingSlot(c, "t2")) {
      sql("UPDATE t2 SET name = 'b' WHERE id = 10", "DELETE FROM t2");
      List<PgMessage> ms = slot.messages();
      var rel = DecodingSlot.of(ms, PgMessage.Relation.class).get(0);
      assertThat(rel.replicaIdentity()).isEqualTo('f');
      assertThat(rel.columns()).extracting(PgMessage.Relation.Column::key).containsExactly(true, true, true);
      assertThat(rel.columns()).extracting(PgMessage.Relation.Column::typeOid).containsExactly(INT8, TEXT, INT4);
      var update = DecodingSlot.of(ms, PgMessage.Update.class).get(0);
      assertThat(update.oldKind()).isEqualTo('O');
      assertThat(update.before().kinds()).containsExactly('t', 't', 'n');
      assertThat(update.before().texts()).containsExactly("10", "a", null);
      assertThat(update.after().texts()).containsExactly("10", "b", null);
      var delete = DecodingSlot.of(ms, PgMessage.Delete.class).get(0);
      assertThat(delete.oldKind()).isEqualTo('O');
      assertThat(delete.before().texts()).containsExactly("10", "b", null);
    }
  }

  @Test
  void truncateNamesEveryRelationAndItsOptions() throws Exception {
    sql("CREATE TABLE t3a (id serial PRIMARY KEY)", "CREATE TABLE t3b (id int PRIMARY KEY)",
        "INSERT INTO t3a DEFAULT VALUES");
    try (DecodingSlot slot = new DecodingSlot(c, "t3a", "t3b")) {
      sql("TRUNCATE t3a, t3b RESTART IDENTITY CASCADE", "TRUNCATE t3b");
      List<PgMessage> ms = slot.messages();
      List<PgMessage.Truncate> ts = DecodingSlot.of(ms, PgMessage.Truncate.class);
      int a = (int) one("SELECT 't3a'::regclass::oid");
      int b = (int) one("SELECT 't3b'::regclass::oid");
      assertThat(ts).hasSize(2);
      assertThat(ts.get(0).relationOids()).containsExactlyInAnyOrder(a, b);
      assertThat(ts.get(0).options()).isEqualTo(3);
      assertThat(ts.get(1).relationOids()).containsExactly(b);
      assertThat(ts.get(1).options()).isZero();
    }
  }

  @Test
  void transactionalAndNonTransactionalLogicalMessages() throws Exception {
    sql("CREATE TABLE t4 (id int PRIMARY KEY)");
    try (DecodingSlot slot = new DecodingSlot(c, "t4")) {
      c.setAutoCommit(false);
      sql("INSERT INTO t4 VALUES (1)");
      long inTx = DecodingSlot.lsn(c, "pg_logical_emit_message(true, 'app', 'héllo')");
      c.commit();
      c.setAutoCommit(true);
      long alone = DecodingSlot.lsn(c, "pg_logical_emit_message(false, 'queen-snap', '\\x00ff01'::bytea, true)");

      List<DecodingSlot.Row> rows = slot.read();
      assertThat(rows).extracting(r -> r.message().getClass().getSimpleName())
          .containsExactly("Begin", "Relation", "Insert", "LogicalMessage", "Commit", "LogicalMessage");
      var tx = (PgMessage.LogicalMessage) rows.get(3).message();
      assertThat(tx.transactional()).isTrue();
      assertThat(tx.lsn()).isEqualTo(inTx).isEqualTo(rows.get(3).lsn());
      assertThat(tx.prefix()).isEqualTo("app");
      assertThat(new String(tx.content(), StandardCharsets.UTF_8)).isEqualTo("héllo");
      var nt = (PgMessage.LogicalMessage) rows.get(5).message();
      assertThat(nt.transactional()).isFalse();
      assertThat(nt.lsn()).isEqualTo(alone);
      assertThat(nt.prefix()).isEqualTo("queen-snap");
      assertThat(nt.content()).containsExactly(0x00, 0xff, 0x01);
    }
  }

  @Test
  void anEnumColumnSendsATypeMessageFirst() throws Exception {
    sql("CREATE TYPE mood AS ENUM ('sad', 'happy')", "CREATE TABLE t5 (id int PRIMARY KEY, m mood)");
    try (DecodingSlot slot = new DecodingSlot(c, "t5")) {
      sql("INSERT INTO t5 VALUES (1, 'happy')");
      List<PgMessage> ms = slot.messages();
      assertThat(ms).extracting(m -> m.getClass().getSimpleName())
          .containsExactly("Begin", "Type", "Relation", "Insert", "Commit");
      int mood = (int) one("SELECT 'mood'::regtype::oid");
      assertThat(ms.get(1)).isEqualTo(new PgMessage.Type(mood, "public", "mood"));
      var rel = (PgMessage.Relation) ms.get(2);
      assertThat(rel.columns().get(1).typeOid()).isEqualTo(mood);
      assertThat(((PgMessage.Insert) ms.get(3)).after().texts()).containsExactly("1", "happy");
    }
  }

  @Test
  void refusesWhatProtocolOneWithTextValuesNeverSends() {
    for (char tag : new char[] {'S', 'E', 'c', 'A', 'P', 'K', 'r', 'p', 'b', 'Z'}) {
      assertThatThrownBy(() -> PgOutputDecoder.decode(ByteBuffer.wrap(new byte[] {(byte) tag, 0, 0, 0, 1})))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("'" + tag + "'");
    }
    // 'I', relation 7, 'N', 1 column, binary value of 1 byte
    ByteBuffer binary = ByteBuffer.allocate(16).put((byte) 'I').putInt(7).put((byte) 'N').putShort((short) 1)
        .put((byte) 'b').putInt(1).put((byte) 5).flip();
    assertThatThrownBy(() -> PgOutputDecoder.decode(binary)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("'b' (binary)");
    ByteBuffer shortBegin = ByteBuffer.allocate(9).put((byte) 'B').putLong(1).flip();
    assertThatThrownBy(() -> PgOutputDecoder.decode(shortBegin)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("'B' is shorter");
    ByteBuffer longCommit = ByteBuffer.allocate(27).put((byte) 'C').put((byte) 0).putLong(1).putLong(2).putLong(3)
        .put((byte) 9).flip();
    assertThatThrownBy(() -> PgOutputDecoder.decode(longCommit)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("1 bytes after");
    assertThatThrownBy(() -> PgOutputDecoder.decode(ByteBuffer.allocate(0))).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void readsFromPositionToLimitOfASharedArrayAndLeavesThePositionAlone() {
    byte[] shared = new byte[40];
    ByteBuffer w = ByteBuffer.wrap(shared);
    w.position(5).put((byte) 'B').putLong(0x1570D68L).putLong(0).putInt(-2); // xid 4294967294, time = PG epoch
    w.put((byte) 'Q');
    ByteBuffer buf = ByteBuffer.wrap(shared, 5, 21).slice();
    buf.position(0);
    var begin = (PgMessage.Begin) PgOutputDecoder.decode(buf);
    assertThat(begin).isEqualTo(new PgMessage.Begin(0x1570D68L, 946_684_800_000_000L, 4294967294L));
    assertThat(buf.position()).isZero();
    ByteBuffer mid = ByteBuffer.wrap(shared, 5, 21); // position 5, limit 26, array offset 0
    assertThat(PgOutputDecoder.decode(mid)).isEqualTo(begin);
  }
}
