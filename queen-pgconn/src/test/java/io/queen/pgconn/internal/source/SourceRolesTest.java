package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import com.fasterxml.jackson.databind.JsonNode;
import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.LogCapture;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The source's setup errors through a running node, one case each, with the code, its fix sentence, and nothing
 * published (no publication, no slot): a table without a key, a role without REPLICATION, without SELECT, not owning
 * the tables of a managed publication, a named publication with a row filter or a column list; {@code wal_level}
 * (a server-wide setting) at the level of the check. And a source whose {@code connection} block carries a
 * password never shows it: not in {@code get}, {@code list}, {@code status}, exception messages or log lines.
 */
@QueenPostgres
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SourceRolesTest {
  static final String KEY = "0123456789abcdef".repeat(4);
  /** Roles are cluster-wide: each run has its own names, dropped afterwards. */
  final String suffix = Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffffL);
  final List<String> roles = new ArrayList<>();
  TestDatabase db;
  Queen queen;

  @BeforeEach
  void start(TestDatabase db) {
    this.db = db;
    queen = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start();
  }

  @AfterEach
  void stop() throws SQLException {
    try {
      queen.connectors().list().forEach(queen.connectors()::delete);
    } finally {
      queen.close();
      for (String r : roles) {
        sql("drop owned by " + r, "drop role " + r);
      }
    }
  }

  void sql(String... statements) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  long count(String q) throws SQLException {
    try (Connection c = db.connection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(q)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /** A role with LOGIN and a password, plus {@code attributes}. */
  String role(String name, String password, String attributes) throws SQLException {
    String r = (name + "_" + suffix).toLowerCase(Locale.ROOT);
    sql("create role " + r + " login password '" + password + "' " + attributes);
    roles.add(r);
    return r;
  }

  String doc(String user, String password, String table, String extra) {
    return "{\"kind\": \"source\", \"connection\": {\"host\": \"" + db.host() + "\", \"port\": " + db.port()
        + ", \"database\": \"" + db.name() + "\", \"user\": \"" + user + "\", \"password\": \"" + password + "\"},"
        + " \"source\": {\"tables\": [{\"table\": \"public." + table + "\", \"queue\": \"" + table + "\"}],"
        + " \"snapshot\": \"never\"" + extra + "}}";
  }

  ConnectorStatus failsWith(String name, ErrorCode code) {
    await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50))
        .until(() -> queen.connectors().status(name).orElseThrow().phase().equals("error"));
    ConnectorStatus s = queen.connectors().status(name).orElseThrow();
    assertThat(s.errorCode()).isEqualTo(code.code());
    assertThat(s.error()).startsWith(code.fix());
    assertThat(s.counters().get("errors")).as("a refused setup counts as an error (what alerts watch)").isPositive();
    return s;
  }

  void nothingPublished(String publication, String slot) throws SQLException {
    assertThat(count("select count(*) from pg_publication where pubname = '" + publication + "'")).isZero();
    assertThat(count("select count(*) from pg_replication_slots where slot_name = '" + slot + "'")).isZero();
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aTableWithoutAKeyIsRefusedAndThePublicationUntouched() throws Exception {
    sql("create table nokey (a int, b text)");
    queen.connectors().put("nokey-src", "{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.nokey\","
        + " \"queue\": \"nokey\"}], \"snapshot\": \"never\"}}");
    failsWith("nokey-src", ErrorCode.SOURCE_NO_KEY);
    nothingPublished("queen_nokey_src", "queen_nokey_src");
    // an update on the table still works: it was never published
    sql("insert into nokey values (1, 'a')", "update nokey set b = 'b'");
  }

  /**
   * A role that may log in but not connect to the database (no CONNECT privilege: 42501 at login) is told apart from a
   * privilege a setup statement lacks (the same SQLState): its own code, whose fix is the GRANT, not setup_failed.
   */
  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  void aRoleWithoutConnectOnTheDatabaseIsConnectPrivilege() throws Exception {
    String r = role("noconnect", "pw-noconnect", "replication");
    sql("create table noconnect (id bigint primary key)", "revoke connect on database " + db.name() + " from public");
    try {
      queen.connectors().put("noconnect-src", doc(r, "pw-noconnect", "noconnect", ""));
      ConnectorStatus s = failsWith("noconnect-src", ErrorCode.CONNECT_PRIVILEGE);
      assertThat(s.error()).contains("42501").doesNotContain("pw-noconnect");
      nothingPublished("queen_noconnect_src", "queen_noconnect_src");
      queen.connectors().delete("noconnect-src");
    } finally {
      sql("grant connect on database " + db.name() + " to public");
    }
  }

  /**
   * A statement of the setup that PostgreSQL refuses for good (here: adding the source's table to a publication
   * another role owns) is {@code setup_failed} with its SQLSTATE, not a failure that passes.
   */
  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aRefusedSetupStatementIsSetupFailedWithItsSqlState() throws Exception {
    String owner = role("pubown", "pw-pubown", "replication");
    sql("create table pubown (id bigint primary key)", "alter table pubown owner to " + owner,
        "create table pubother (id bigint primary key)", "create publication queen_pubown_src for table pubother");
    queen.connectors().put("pubown-src", doc(owner, "pw-pubown", "pubown", ""));
    ConnectorStatus s = failsWith("pubown-src", ErrorCode.SETUP_FAILED);
    assertThat(s.error()).contains("42501").doesNotContain("pw-pubown");
    assertThat(count("select count(*) from pg_publication_tables where pubname = 'queen_pubown_src'"
        + " and tablename = 'pubown'")).isZero();
    sql("drop publication queen_pubown_src");
  }

  @Test
  void walLevelIsCheckedBeforeAnythingElse() throws Exception {
    // wal_level is a server setting (postmaster context): it cannot differ per database, so the check is tested here
    assertThatThrownBy(() -> SourceSetup.server(170000, "replica", true, "src")).isInstanceOfSatisfying(
        SourceSetup.Failed.class, f -> {
          assertThat(f.code).isEqualTo(ErrorCode.WAL_LEVEL);
          assertThat(f.getMessage()).isEqualTo("wal_level is replica");
        });
    assertThatThrownBy(() -> SourceSetup.server(160004, "logical", true, "src")).isInstanceOfSatisfying(
        SourceSetup.Failed.class, f -> assertThat(f.code).isEqualTo(ErrorCode.SERVER_VERSION));
    assertThatThrownBy(() -> SourceSetup.server(170000, "logical", false, "Src Role")).isInstanceOfSatisfying(
        SourceSetup.Failed.class, f -> {
          assertThat(f.code).isEqualTo(ErrorCode.NO_REPLICATION);
          assertThat(f.getMessage()).isEqualTo("role Src Role has no REPLICATION attribute: ALTER ROLE \"Src Role\""
              + " REPLICATION");
        });
    SourceSetup.server(170002, "logical", true, "src");
    assertThat(ErrorCode.WAL_LEVEL.fix()).contains("wal_level = logical").contains("restart");
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aRoleWithoutReplicationIsRefused() throws Exception {
    sql("create table norepl (id bigint primary key)");
    String r = role("norepl", "pw-norepl", "");
    sql("alter table norepl owner to " + r);
    queen.connectors().put("norepl-src", doc(r, "pw-norepl", "norepl", ""));
    failsWith("norepl-src", ErrorCode.NO_REPLICATION);
    nothingPublished("queen_norepl_src", "queen_norepl_src");
  }

  /**
   * A server out of connections (53300, as out of disk 53100: class 53) passes: the source shows connect_failed and
   * goes on by itself, each change once, never setup_failed ("refused in a way that does not pass").
   */
  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aServerOutOfConnectionsIsAPassingConnectFailure() throws Exception {
    sql("create table limited (id bigint primary key)");
    String r = role("limited", "pw-limited", "replication");
    sql("alter table limited owner to " + r, "grant create on database " + db.name() + " to " + r);
    queen.connectors().put("limited-src", doc(r, "pw-limited", "limited", ""));
    await().atMost(Duration.ofSeconds(30)).until(() -> "streaming".equals(queen.connectors().status("limited-src")
        .orElseThrow().phase()));
    sql("insert into limited values (1)");
    sql("alter role " + r + " connection limit 0");
    try {
      sql("select pg_terminate_backend(pid) from pg_stat_activity where usename = '" + r + "'");
      sql("insert into limited values (2)");
      ConnectorStatus s = failsWith("limited-src", ErrorCode.CONNECT_FAILED);
      assertThat(s.error()).contains("53300");
    } finally {
      sql("alter role " + r + " connection limit -1");
    }
    sql("insert into limited values (3)");
    List<Long> ids = new ArrayList<>();
    await().atMost(Duration.ofSeconds(30)).until(() -> {
      queen.queue("limited").consumer().batch(10).partitions(10).autoAck(true).pop()
          .forEach(m -> ids.add(m.payload().get("key").get("id").asLong()));
      return ids.size() >= 3;
    });
    assertThat(ids).containsExactlyInAnyOrder(1L, 2L, 3L);
    assertThat(queen.connectors().status("limited-src").orElseThrow().phase()).isEqualTo("streaming");
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aRoleWithoutSelectIsRefused() throws Exception {
    sql("create table nosel (id bigint primary key)");
    String r = role("nosel", "pw-nosel", "replication");
    sql("create publication nosel_pub for table nosel");
    queen.connectors().put("nosel-src", doc(r, "pw-nosel", "nosel", ", \"publication\": \"nosel_pub\","
        + " \"managePublication\": false"));
    failsWith("nosel-src", ErrorCode.SELECT_PRIVILEGE);
    assertThat(count("select count(*) from pg_replication_slots where slot_name = 'queen_nosel_src'")).isZero();
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aManagedPublicationOnATableTheRoleDoesNotOwnIsRefused() throws Exception {
    sql("create table notmine (id bigint primary key)");
    String r = role("notmine", "pw-notmine", "replication");
    sql("grant select on notmine to " + r);
    queen.connectors().put("notmine-src", doc(r, "pw-notmine", "notmine", ""));
    failsWith("notmine-src", ErrorCode.NOT_OWNER);
    nothingPublished("queen_notmine_src", "queen_notmine_src");
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aManagedPublicationWithoutCreateOnTheDatabaseIsRefused() throws Exception {
    sql("create table nocreate (id bigint primary key)");
    String r = role("nocreate", "pw-nocreate", "replication");
    sql("alter table nocreate owner to " + r);
    queen.connectors().put("nocreate-src", doc(r, "pw-nocreate", "nocreate", ""));
    failsWith("nocreate-src", ErrorCode.CREATE_PRIVILEGE);
    nothingPublished("queen_nocreate_src", "queen_nocreate_src");
    sql("grant create on database " + db.name() + " to " + r);
    await().atMost(Duration.ofSeconds(20)).until(() -> queen.connectors().status("nocreate-src").orElseThrow().phase()
        .equals("streaming"));
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void aNamedPublicationWithARowFilterOrAColumnListIsRefused() throws Exception {
    sql("create table filtered (id bigint primary key, secret text)",
        "create publication rows_pub for table filtered where (id > 10)",
        "create publication cols_pub for table filtered (id)");
    queen.connectors().put("rows-src", "{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.filtered\","
        + " \"queue\": \"filtered\"}], \"snapshot\": \"never\", \"publication\": \"rows_pub\", \"managePublication\": false}}");
    queen.connectors().put("cols-src", "{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.filtered\","
        + " \"queue\": \"filtered\"}], \"snapshot\": \"never\", \"publication\": \"cols_pub\", \"managePublication\": false}}");
    failsWith("rows-src", ErrorCode.PUBLICATION_FILTERED);
    failsWith("cols-src", ErrorCode.PUBLICATION_FILTERED);
    assertThat(count("select count(*) from pg_replication_slots where slot_name in ('queen_rows_src', 'queen_cols_src')"))
        .isZero();
    // a managed publication is never given a filter: the same table under it is accepted
    queen.connectors().put("whole-src", "{\"kind\": \"source\", \"source\": {\"tables\": [{\"table\": \"public.filtered\","
        + " \"queue\": \"filtered\"}], \"snapshot\": \"never\"}}");
    await().atMost(Duration.ofSeconds(20)).until(() -> queen.connectors().status("whole-src").orElseThrow().phase()
        .equals("streaming"));
  }

  @Test
  @EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
  @RequiresLogicalReplication
  void thePasswordNeverShows() throws Exception {
    String password = "S3cret-" + suffix + "-pw";
    sql("create table secrets (id bigint primary key, v text)");
    String r = role("owner", password, "replication");
    sql("alter table secrets owner to " + r, "grant create on database " + db.name() + " to " + r);
    try (LogCapture logs = LogCapture.start()) {
      queen.connectors().put("secret-src", doc(r, password, "secrets", ""));
      await().atMost(Duration.ofSeconds(20)).until(() -> queen.connectors().status("secret-src").orElseThrow().phase()
          .equals("streaming"));
      sql("insert into secrets values (1, 'a')");
      await().atMost(Duration.ofSeconds(20)).until(() -> queen.connectors().status("secret-src").orElseThrow()
          .messages() == 1);
      JsonNode stored = queen.connectors().get("secret-src").orElseThrow();
      assertThat(stored.toString()).doesNotContain(password);
      assertThat(stored.path("connection").has("password")).isFalse();
      assertThat(String.join(",", queen.connectors().list())).doesNotContain(password);
      assertThat(queen.connectors().status("secret-src").orElseThrow().toString()).doesNotContain(password);
      assertThat(queen.status().toString()).doesNotContain(password);
      // a refused login (the test server trusts local logins, so an unknown role): the error never shows the password
      queen.connectors().put("wrong-src", doc("nobody_" + suffix, password, "secrets", ""));
      ConnectorStatus wrong = failsWith("wrong-src", ErrorCode.LOGIN_FAILED);
      assertThat(wrong.toString()).doesNotContain(password);
      // a document refused by the validator: the message does not echo the password
      assertThatThrownBy(() -> queen.connectors().put("bad-src", doc(r, password, "secrets", ", \"maxBundleMessages\": 0")))
          .satisfies(e -> assertThat(e.getMessage()).doesNotContain(password));
      // a node without the key cannot open the sealed password: the error says so, without the password
      try (Queen noKey = EmbeddedQueen.builder().dataSource(db.dataSource()).encryptionKey(null)
          .connectors(ConnectorOptions.defaults().refresh(Duration.ofMillis(200))).start()) {
        await().atMost(Duration.ofSeconds(20)).until(() -> "no_encryption_key".equals(
            noKey.connectors().status("secret-src").orElseThrow().errorCode()));
        assertThat(noKey.connectors().status("secret-src").orElseThrow().toString()).doesNotContain(password);
      }
      queen.connectors().delete("secret-src");
      queen.connectors().delete("wrong-src");
      assertThat(logs.text()).contains("secret-src").doesNotContain(password);
    }
  }
}
