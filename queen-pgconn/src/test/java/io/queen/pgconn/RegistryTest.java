package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.ConnectorException;
import io.queen.InvalidConnectorException;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RegistryTest {
  static final String KEY = "0123456789abcdef".repeat(4);
  static final String OK = """
      {"kind": "sink", "sink": {"queue": "invoices", "table": "public.invoices", "mode": "upsert"}}""";
  static final String WITH_PASSWORD = """
      {"kind": "sink",
       "connection": {"host": "pg", "database": "postgres", "user": "postgres", "password": "s3cr3t-pw", "sslMode": "disable"},
       "sink": {"queue": "invoices", "table": "public.invoices", "mode": "upsert"}}""";

  Queen queen;
  DataSource ds;

  @BeforeEach
  void start(DataSource ds) {
    this.ds = ds;
    queen = EmbeddedQueen.builder().dataSource(ds).encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().run(false)).start();
    queen.connectors().list().forEach(queen.connectors()::delete); // one database per class
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  /**
   * A sink stored but not yet started by a node that runs connectors reads {@code starting} there until that node's
   * next re-read, not {@code disabled}; a disabled one reads {@code disabled}.
   */
  @Test
  void aStoredConnectorIsStartingUntilTheNodesNextReRead() {
    // a node reads the documents once as it starts, then every refresh; the marker (stored before, its table
    // missing) shows when that first read is done, so the puts below come after it for sure
    queen.connectors().put("marker-sink", OK.replace("invoices", "no_such_table"));
    try (Queen runner = EmbeddedQueen.builder().dataSource(ds).encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().refresh(java.time.Duration.ofMinutes(10))).start()) {
      org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(20))
          .until(() -> runner.connectors().status("marker-sink").orElseThrow().phase().equals("error"));
      runner.connectors().put("later-sink", OK.replace("invoices", "later"));
      runner.connectors().put("off-sink", OK.replace("\"kind\": \"sink\"", "\"kind\": \"sink\", \"enabled\": false"));
      assertThat(runner.connectors().status("later-sink")).get().extracting(s -> s.phase()).isEqualTo("starting");
      assertThat(runner.connectors().status("off-sink")).get().extracting(s -> s.phase()).isEqualTo("disabled");
      assertThat(queen.connectors().status("later-sink")).get().extracting(s -> s.phase()).isEqualTo("disabled");
      // the same for a source (no node holds its lease yet)
      runner.connectors().put("later-src", """
          {"kind": "source", "source": {"tables": [{"table": "public.later_src", "queue": "later-src"}]}}""");
      runner.connectors().put("off-src", """
          {"kind": "source", "enabled": false, "source": {"tables": [{"table": "public.off_src", "queue": "off-src"}]}}""");
      assertThat(runner.connectors().status("later-src")).get().extracting(s -> s.phase()).isEqualTo("starting");
      assertThat(runner.connectors().status("off-src")).get().extracting(s -> s.phase()).isEqualTo("disabled");
      // a node that runs no connectors still reports a source by its lease: enabled and owned by nobody yet
      assertThat(queen.connectors().status("later-src")).get().extracting(s -> s.phase()).isEqualTo("starting");
    } finally {
      queen.connectors().delete("marker-sink");
    }
  }

  /**
   * A sink whose document says {@code enabled: false} reads {@code disabled} on a node that runs connectors, also
   * after that node's re-read and when a running sink is switched off (it once read {@code starting} for good).
   */
  @Test
  void aDisabledSinkReadsDisabledAfterTheReReadAndWhenSwitchedOff() throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists invoices (id text primary key, amount numeric)");
    }
    try (Queen runner = EmbeddedQueen.builder().dataSource(ds).encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().refresh(java.time.Duration.ofMillis(200))).start()) {
      runner.connectors().put("off-at-once", OK.replace("\"kind\": \"sink\"", "\"kind\": \"sink\", \"enabled\": false"));
      runner.connectors().put("on-then-off", OK);
      org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(20))
          .until(() -> runner.connectors().status("on-then-off").orElseThrow().phase().equals("running"));
      runner.connectors().put("on-then-off", OK.replace("\"kind\": \"sink\"", "\"kind\": \"sink\", \"enabled\": false"));
      org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(20))
          .until(() -> runner.connectors().status("on-then-off").orElseThrow().phase().equals("disabled"));
      // three re-reads (200 ms each): the phase stays
      org.awaitility.Awaitility.await().during(java.time.Duration.ofMillis(600)).atMost(java.time.Duration.ofSeconds(5))
          .until(() -> runner.connectors().status("on-then-off").orElseThrow().phase().equals("disabled"));
      assertThat(runner.connectors().status("off-at-once")).get().extracting(s -> s.phase()).isEqualTo("disabled");
    }
  }

  /**
   * During a rolling upgrade a node of an earlier version wrote {@code version + 1} where this one takes the sequence's
   * next value: the two met, a put of each kind stored one version for two documents, and the nodes kept running the
   * older one (a sink disabled that way went on writing). The table hands out versions itself now.
   */
  @Test
  void aPutOfAnEarlierVersionAndOneOfThisVersionNeverShareAVersion() throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists invoices (id text primary key, amount numeric)");
    }
    try (Queen runner = EmbeddedQueen.builder().dataSource(ds).encryptionKey(KEY)
        .connectors(ConnectorOptions.defaults().refresh(java.time.Duration.ofMillis(200))).start()) {
      runner.connectors().put("mixed", OK);
      org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(20))
          .until(() -> runner.connectors().status("mixed").orElseThrow().phase().equals("running"));
      java.util.List<Long> versions = new java.util.ArrayList<>();
      versions.add(version("mixed"));
      // what an earlier version's put did: the next per-row number, twice
      for (int i = 0; i < 2; i++) {
        try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
          st.execute("update queen.connectors set version = version + 1, updated_at = now() where name = 'mixed'");
        }
        versions.add(version("mixed"));
      }
      assertThat(runner.connectors().setEnabled("mixed", false)).isTrue();
      versions.add(version("mixed"));
      assertThat(versions).doesNotHaveDuplicates().isSorted();
      org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(20))
          .until(() -> runner.connectors().status("mixed").orElseThrow().phase().equals("disabled"));
      // and an earlier version's insert of a new document (version 1) gets the sequence's next value too
      try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
        st.execute("insert into queen.connectors (name, kind, document) select 'mixed-copy', kind, document"
            + " from queen.connectors where name = 'mixed'");
      }
      assertThat(version("mixed-copy")).isGreaterThan(versions.get(versions.size() - 1));
      runner.connectors().delete("mixed-copy");
    }
  }

  /**
   * An application that puts its connectors at every start puts the same documents again: nothing is stored anew
   * (no new version, so no node restarts the connector), whatever the key order and spacing; a changed field or
   * password is a change.
   */
  @Test
  void theSameDocumentPutAgainChangesNothing() throws Exception {
    queen.connectors().put("again", WITH_PASSWORD);
    long version = version("again");
    byte[] sealed = sealedPassword("again");
    queen.connectors().put("again", WITH_PASSWORD);
    queen.connectors().put("again", """
        {"sink": {"mode": "upsert", "table": "public.invoices", "queue": "invoices"},
         "connection": {"sslMode": "disable", "password": "s3cr3t-pw", "user": "postgres", "database": "postgres",
                        "host": "pg"},
         "kind": "sink"}""");
    assertThat(version("again")).as("the same document, twice, keys in another order").isEqualTo(version);
    assertThat(sealedPassword("again")).isEqualTo(sealed);
    // a JsonNode that holds a long where the stored jsonb reads back an int is the same value
    com.fasterxml.jackson.databind.node.ObjectNode built = (com.fasterxml.jackson.databind.node.ObjectNode)
        new com.fasterxml.jackson.databind.ObjectMapper().readTree(WITH_PASSWORD.replace("\"sslMode\"",
            "\"port\": 5432, \"sslMode\""));
    queen.connectors().put("again", built);
    long withPort = version("again");
    ((com.fasterxml.jackson.databind.node.ObjectNode) built.get("connection")).put("port", 5432L);
    queen.connectors().put("again", built);
    assertThat(version("again")).as("5432 as a long").isEqualTo(withPort);
    version = withPort;
    // setEnabled writes "enabled" into the stored document; the document without it, put again, is still the same
    assertThat(queen.connectors().setEnabled("again", false)).isTrue();
    assertThat(queen.connectors().setEnabled("again", true)).isTrue();
    long resumed = version("again");
    queen.connectors().put("again", built);
    assertThat(version("again")).as("enabled left out, true stored").isEqualTo(resumed);
    queen.connectors().put("again", built.deepCopy().put("enabled", false));
    assertThat(version("again")).as("enabled false").isGreaterThan(resumed);
    queen.connectors().put("again", built);
    version = version("again");
    queen.connectors().put("again", WITH_PASSWORD.replace("s3cr3t-pw", "another-pw"));
    long passwordChanged = version("again");
    assertThat(passwordChanged).as("another password").isGreaterThan(version);
    queen.connectors().put("again", WITH_PASSWORD.replace("\"upsert\"", "\"append\""));
    long modeChanged = version("again");
    assertThat(modeChanged).as("another mode").isGreaterThan(passwordChanged);
    queen.connectors().put("again", OK);
    assertThat(version("again")).as("no connection block").isGreaterThan(modeChanged);
    assertThat(sealedPassword("again")).isNull();
  }

  /** Pausing and resuming without the whole document: the sealed password stays, as every other field. */
  @Test
  void setEnabledPausesAndResumesAndKeepsThePassword() throws Exception {
    queen.connectors().put("remote", WITH_PASSWORD);
    byte[] sealed = sealedPassword("remote");
    JsonNode before = queen.connectors().get("remote").orElseThrow();
    assertThat(queen.connectors().setEnabled("remote", false)).isTrue();
    assertThat(queen.connectors().get("remote").orElseThrow().get("enabled").asBoolean()).isFalse();
    assertThat(queen.connectors().setEnabled("remote", true)).isTrue();
    JsonNode after = queen.connectors().get("remote").orElseThrow();
    assertThat(after.get("enabled").asBoolean()).isTrue();
    com.fasterxml.jackson.databind.node.ObjectNode a = after.deepCopy();
    com.fasterxml.jackson.databind.node.ObjectNode b = before.deepCopy();
    a.remove("enabled");
    b.remove("enabled");
    assertThat((JsonNode) a).as("everything but enabled kept").isEqualTo(b);
    assertThat(sealedPassword("remote")).isEqualTo(sealed);
    long version = version("remote");
    assertThat(queen.connectors().setEnabled("remote", true)).as("already enabled: true, and no new version").isTrue();
    assertThat(version("remote")).isEqualTo(version);
    assertThat(queen.connectors().setEnabled("nobody", true)).isFalse();
    assertThat(queen.connectors().list()).containsExactly("remote");
  }

  private long version(String name) throws Exception {
    try (Connection c = ds.getConnection();
        java.sql.PreparedStatement st = c.prepareStatement("select version from queen.connectors where name = ?")) {
      st.setString(1, name);
      try (ResultSet rs = st.executeQuery()) {
        assertThat(rs.next()).isTrue();
        return rs.getLong(1);
      }
    }
  }

  private byte[] sealedPassword(String name) throws Exception {
    try (Connection c = ds.getConnection();
        java.sql.PreparedStatement st = c.prepareStatement("select password_sealed from queen.connectors where name = ?")) {
      st.setString(1, name);
      try (ResultSet rs = st.executeQuery()) {
        assertThat(rs.next()).isTrue();
        return rs.getBytes(1);
      }
    }
  }

  @Test
  void putGetListDeleteRoundTrip() {
    queen.connectors().put("invoices-sink", OK);
    assertThat(queen.connectors().list()).containsExactly("invoices-sink");
    assertThat(queen.connectors().get("invoices-sink")).get().extracting(d -> d.at("/sink/mode").asText())
        .isEqualTo("upsert");
    assertThat(queen.connectors().status("invoices-sink")).get().extracting(s -> s.phase()).isEqualTo("disabled");
    assertThat(queen.connectors().delete("invoices-sink")).isTrue();
    assertThat(queen.connectors().get("invoices-sink")).isEmpty();
    assertThat(queen.connectors().delete("invoices-sink")).isFalse();
  }

  @Test
  void thePasswordIsSealedAndNeverReturned() throws Exception {
    queen.connectors().put("remote", WITH_PASSWORD);
    assertThat(queen.connectors().get("remote").orElseThrow().toString()).doesNotContain("s3cr3t-pw")
        .doesNotContain("password");
    assertThat(queen.connectors().status().toString()).doesNotContain("s3cr3t-pw");
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select document::text, encode(password_sealed, 'escape') from queen.connectors")) {
      rs.next();
      assertThat(rs.getString(1)).doesNotContain("s3cr3t-pw");
      assertThat(rs.getString(2)).doesNotContain("s3cr3t-pw");
    }
  }

  @Test
  void aNodeWithoutTheKeyRefusesAPasswordAndStoresNothing(DataSource ds) {
    try (Queen noKey = EmbeddedQueen.builder().dataSource(ds).encryptionKey(null)
        .connectors(ConnectorOptions.defaults().run(false)).start()) {
      assertThatThrownBy(() -> noKey.connectors().put("remote", WITH_PASSWORD)).isInstanceOf(ConnectorException.class)
          .hasMessageContaining("no_encryption_key").hasMessageContaining("QUEEN_ENCRYPTION_KEY")
          .hasMessageNotContaining("s3cr3t-pw");
      assertThat(noKey.connectors().list()).isEmpty();
      noKey.connectors().put("local", OK); // no password: no key needed
    }
  }

  @Test
  void aNodeWithAWrongKeyReportsItAndNeverConnects(DataSource ds) throws Exception {
    queen.connectors().put("remote", WITH_PASSWORD);
    try (Queen wrong = EmbeddedQueen.builder().dataSource(ds).encryptionKey("f".repeat(64))
        .connectors(ConnectorOptions.defaults().refresh(java.time.Duration.ofMillis(200))).start()) {
      org.awaitility.Awaitility.await().atMost(10, TimeUnit.SECONDS).untilAsserted(() ->
          assertThat(wrong.connectors().status("remote")).get().satisfies(s -> {
            assertThat(s.phase()).isEqualTo("error");
            assertThat(s.errorCode()).isEqualTo("wrong_encryption_key");
            assertThat(s.error()).contains("give this node the key").doesNotContain("s3cr3t-pw");
          }));
    }
  }

  @Test
  void aSourceDocumentRoundTripsWithItsDefaults() {
    queen.connectors().put("orders-src", """
        {"kind": "source", "source": {"tables": [{"table": "public.orders", "queue": "orders"},
          {"table": "items", "queue": "items", "partitionBy": ["order_id"]}, {"table": "s.log", "queue": "log",
          "partitionBy": "single"}], "snapshot": "never", "maxBundleMessages": 500}}""");
    assertThat(queen.connectors().get("orders-src")).get().extracting(d -> d.at("/source/tables/1/partitionBy/0").asText())
        .isEqualTo("order_id");
    assertThat(queen.connectors().status("orders-src")).get().satisfies(s -> {
      assertThat(s.kind()).isEqualTo("source");
      assertThat(s.phase()).isEqualTo("starting"); // enabled; no node owns it (this one runs no connectors)
    });
    assertThat(queen.connectors().resync("nope")).isFalse();
    queen.connectors().put("invoices-sink", OK);
    assertThatThrownBy(() -> queen.connectors().resync("invoices-sink")).isInstanceOf(InvalidConnectorException.class)
        .hasMessageContaining("only a source");
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', value = {
      "name: uppercase             | Bad-Name | " + "{\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\"}} | name | lowercase letters",
      "name: too long              | a123456789a123456789a123456789a123456789a1234567x | {\"kind\":\"sink\"} | name | 48 characters",
      "name: leading dash          | -x | {\"kind\":\"sink\"} | name | starting with a letter or a digit",
      "unknown top-level field     | s | {\"kind\":\"sink\",\"sinks\":{}} | sinks | unknown field",
      "kind missing                | s | {\"sink\":{}} | kind | missing",
      "kind wrong                  | s | {\"kind\":\"pipe\",\"sink\":{}} | kind | given \"pipe\"",
      "sink missing                | s | {\"kind\":\"sink\"} | sink | missing",
      "unknown sink field          | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"batch\":5}} | sink.batch | unknown field",
      "mode not allowed            | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"merge\"}} | sink.mode | allowed are append, upsert, cdc, sql",
      "mode wrong type             | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":1}} | sink.mode | allowed is a string",
      "queue missing               | s | {\"kind\":\"sink\",\"sink\":{\"table\":\"t\",\"mode\":\"append\"}} | sink.queue | missing",
      "queue bad name              | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"a b\",\"table\":\"t\",\"mode\":\"append\"}} | sink.queue | queue name",
      "table injection             | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t; drop table x\",\"mode\":\"append\"}} | sink.table | schema.table",
      "table missing               | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"mode\":\"append\"}} | sink.table | missing",
      "workers out of range        | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"workers\":65}} | sink.workers | 1..64",
      "batchSize zero              | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"batchSize\":0}} | sink.batchSize | 1..10000",
      "maxAttempts fraction        | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"maxAttempts\":2.5}} | sink.maxAttempts | 1..100",
      "subscriptionMode bad        | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"subscriptionMode\":\"latest\"}} | sink.subscriptionMode | ISO-8601",
      "metadata unknown fact       | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"metadata\":{\"lsn\":\"c\"}}} | sink.metadata.lsn | allowed are partition",
      "metadata bad column         | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"metadata\":{\"offset\":\"x y\"}}} | sink.metadata.offset | column name",
      "statement outside sql mode  | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"statement\":\"select 1\"}} | sink.statement | only for mode",
      "sql without statement       | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"mode\":\"sql\"}} | sink.statement | missing",
      "sql param bad path          | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"mode\":\"sql\",\"statement\":\"select $1\",\"params\":[\"amount\"]}} | sink.params[0] | $.a.b",
      "sql params count            | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"mode\":\"sql\",\"statement\":\"select $1, $2\",\"params\":[\"$.a\"]}} | sink.params | exactly one param",
      "sql placeholder zero        | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"mode\":\"sql\",\"statement\":\"select $0, $1\",\"params\":[\"$.a\"]}} | sink.statement | allowed are $1..$n",
      "sql placeholder huge        | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"mode\":\"sql\",\"statement\":\"select $1, $12345678901\",\"params\":[\"$.a\"]}} | sink.statement | 10 or more digits",
      "sql param index too long    | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"mode\":\"sql\",\"statement\":\"select $1\",\"params\":[\"$[99999999999]\"]}} | sink.params[0] | at most 9 digits",
      "truncates outside cdc       | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"upsert\",\"truncates\":true}} | sink.truncates | only for mode",
      "connection unknown field    | s | {\"kind\":\"sink\",\"connection\":{\"host\":\"h\",\"database\":\"d\",\"user\":\"u\",\"pass\":\"x\"},\"sink\":{}} | connection.pass | unknown field",
      "connection host missing     | s | {\"kind\":\"sink\",\"connection\":{\"database\":\"d\",\"user\":\"u\"},\"sink\":{}} | connection.host | missing",
      "connection host with port   | s | {\"kind\":\"sink\",\"connection\":{\"host\":\"db:5433\",\"database\":\"d\",\"user\":\"u\"},\"sink\":{}} | connection.host | the port goes in connection.port",
      "consumer group reserved     | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"append\",\"consumerGroup\":\"__QUEUE_MODE__\"}} | sink.consumerGroup | belong to Queen",
      "connection port range       | s | {\"kind\":\"sink\",\"connection\":{\"host\":\"h\",\"port\":70000,\"database\":\"d\",\"user\":\"u\"},\"sink\":{}} | connection.port | 1..65535",
      "connection sslMode          | s | {\"kind\":\"sink\",\"connection\":{\"host\":\"h\",\"database\":\"d\",\"user\":\"u\",\"sslMode\":\"verify-ca\"},\"sink\":{}} | connection.sslMode | disable, require, verify-full",
      "connection password type    | s | {\"kind\":\"sink\",\"connection\":{\"host\":\"h\",\"database\":\"d\",\"user\":\"u\",\"password\":97531864},\"sink\":{}} | connection.password | a string",
      "enabled wrong type          | s | {\"kind\":\"sink\",\"enabled\":\"yes\",\"sink\":{}} | enabled | true or false",
      "not JSON                    | s | {kind: | (document) | not valid JSON",
      "a key twice                 | s | {\"kind\":\"sink\",\"sink\":{\"queue\":\"q\",\"table\":\"t\",\"mode\":\"upsert\",\"mode\":\"append\"}} | (document) | a key is given twice in one object (Duplicate field",
      "source: tables missing      | s | {\"kind\":\"source\",\"source\":{}} | source.tables | missing",
      "source: tables empty        | s | {\"kind\":\"source\",\"source\":{\"tables\":[]}} | source.tables | 1..100",
      "source: unknown field       | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"slot\":\"x\"}} | source.slot | unknown field",
      "source: unknown table field | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\",\"key\":\"id\"}]}} | source.tables[0].key | unknown field",
      "source: table injection     | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"a.b.c\",\"queue\":\"q\"}]}} | source.tables[0].table | schema.table",
      "source: table twice         | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"},{\"table\":\"public.orders\",\"queue\":\"o2\"}]}} | source.tables[1].table | listed twice",
      "source: queue bad           | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"t\",\"queue\":\"a b\"}]}} | source.tables[0].queue | queue name",
      "source: queue missing       | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"t\"}]}} | source.tables[0].queue | missing",
      "source: partitionBy word    | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\",\"partitionBy\":\"all\"}]}} | source.tables[0].partitionBy | single",
      "source: partitionBy column  | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\",\"partitionBy\":[\"x y\"]}]}} | source.tables[0].partitionBy[0] | column name",
      "source: partitionBy twice   | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\",\"partitionBy\":[\"a\",\"a\"]}]}} | source.tables[0].partitionBy[1] | named twice",
      "source: publication bad     | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"publication\":\"p; drop\"}} | source.publication | publication name",
      "source: managePublication   | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"managePublication\":\"yes\"}} | source.managePublication | true or false",
      "source: maxBundleMessages   | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"maxBundleMessages\":0}} | source.maxBundleMessages | 1..10000",
      "source: maxBundleBytes      | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"maxBundleBytes\":1000}} | source.maxBundleBytes | 65536..67108864",
      "source: snapshotChunkRows   | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"snapshotChunkRows\":100001}} | source.snapshotChunkRows | 1..100000",
      "source: snapshot mode       | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"snapshot\":\"always\"}} | source.snapshot | never",
      "source: truncates true      | s | {\"kind\":\"source\",\"source\":{\"tables\":[{\"table\":\"public.orders\",\"queue\":\"orders\"}],\"truncates\":true}} | source.truncates | skipped",
      "source: with a sink block   | s | {\"kind\":\"source\",\"sink\":{},\"source\":{}} | sink | a source document has no",
  })
  void aBadDocumentIsRefusedNamingTheFieldAndNothingIsStored(String rule, String name, String doc, String field,
      String says) {
    assertThatThrownBy(() -> queen.connectors().put(name, doc)).isInstanceOf(InvalidConnectorException.class)
        .hasMessageContaining(says).hasMessageNotContaining("97531864")
        .satisfies(e -> assertThat(((InvalidConnectorException) e).field()).isEqualTo(field));
    assertThat(queen.connectors().list()).isEmpty();
  }
}
