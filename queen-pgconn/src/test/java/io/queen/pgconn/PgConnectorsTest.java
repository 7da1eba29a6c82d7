package io.queen.pgconn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.InvalidConnectorException;
import io.queen.pgconn.PgConnectors.Metadata;
import io.queen.pgconn.PgConnectors.SinkMode;
import io.queen.pgconn.PgConnectors.SslMode;
import io.queen.pgconn.internal.Documents;
import java.time.Instant;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/** The typed document builders give the README's documents exactly, and are refused exactly as the JSON would be. */
class PgConnectorsTest {
  static final ObjectMapper M = new ObjectMapper();

  /** The README's document, compact, in its own field order. */
  static String seed(String json) throws Exception {
    return M.writeValueAsString(M.readTree(json));
  }

  static PgConnectors.Connection pg() {
    return PgConnectors.connection("pg", "postgres", "postgres").password("secret").sslMode(SslMode.DISABLE);
  }

  @Test
  void theSeedsInvoicesSink() throws Exception {
    assertThat(PgConnectors.sink("invoices-sink").connection(pg()).queue("invoices").table("public.invoices")
        .mode(SinkMode.UPSERT).metadata(Metadata.OFFSET, "queen_offset").toJson()).isEqualTo(seed("""
            {
              "kind": "sink",
              "connection": {"host": "pg", "database": "postgres", "user": "postgres", "password": "secret", "sslMode": "disable"},
              "sink": {"queue": "invoices", "table": "public.invoices", "mode": "upsert", "metadata": {"offset": "queen_offset"}}
            }"""));
  }

  @Test
  void theSeedsPaymentsSqlSink() throws Exception {
    assertThat(PgConnectors.sink("payments").connection(PgConnectors.connection("pg", "postgres", "postgres")
        .password("secret")).queue("payments").table("public.accounts").mode(SinkMode.SQL)
        .statement("UPDATE accounts SET balance = balance + $1::numeric WHERE id = $2::bigint")
        .params("$.amount", "$.accountId").toJson()).isEqualTo(seed("""
            {
              "kind": "sink",
              "connection": {"host": "pg", "database": "postgres", "user": "postgres", "password": "secret"},
              "sink": {
                "queue": "payments",
                "table": "public.accounts",
                "mode": "sql",
                "statement": "UPDATE accounts SET balance = balance + $1::numeric WHERE id = $2::bigint",
                "params": ["$.amount", "$.accountId"]
              }
            }"""));
  }

  @Test
  void theSeedsCdcCopyAndSource() throws Exception {
    assertThat(PgConnectors.sink("orders-copy").connection(pg()).queue("orders").table("public.orders_copy")
        .mode(SinkMode.CDC).toJson()).isEqualTo(seed("""
            {
              "kind": "sink",
              "connection": {"host": "pg", "database": "postgres", "user": "postgres", "password": "secret", "sslMode": "disable"},
              "sink": {"queue": "orders", "table": "public.orders_copy", "mode": "cdc"}
            }"""));
    assertThat(PgConnectors.source("orders-src").connection(pg()).table("public.orders", "orders").toJson())
        .isEqualTo(seed("""
            {
              "kind": "source",
              "connection": {"host": "pg", "database": "postgres", "user": "postgres", "password": "secret", "sslMode": "disable"},
              "source": {"tables": [{"table": "public.orders", "queue": "orders"}]}
            }"""));
  }

  @Test
  void everyOtherFieldWritesItsSeedName() throws Exception {
    JsonNode sink = PgConnectors.sink("all-fields").enabled(false).connection(PgConnectors.connection("h", "d", "u")
        .port(6543).sslMode(SslMode.VERIFY_FULL)).queue("q").table("s.t").mode(SinkMode.CDC).consumerGroup("g")
        .subscriptionFrom(Instant.parse("2026-01-02T03:04:05Z")).workers(4).batchSize(100).maxAttempts(5)
        .metadata(Metadata.PARTITION, "p").metadata(Metadata.PARTITION_ID, "pid").metadata(Metadata.TRANSACTION_ID, "tx")
        .metadata(Metadata.CREATED_AT, "at").metadata(Metadata.PAYLOAD, "body").truncates(true).toJsonNode();
    assertThat(sink).isEqualTo(M.readTree("""
        {"kind": "sink", "enabled": false, "connection": {"host": "h", "database": "d", "user": "u", "port": 6543,
         "sslMode": "verify-full"},
         "sink": {"queue": "q", "table": "s.t", "mode": "cdc", "consumerGroup": "g",
                  "subscriptionMode": "2026-01-02T03:04:05Z", "workers": 4, "batchSize": 100, "maxAttempts": 5,
                  "metadata": {"partition": "p", "partitionId": "pid", "transactionId": "tx", "createdAt": "at",
                               "payload": "body"},
                  "truncates": true}}"""));
    JsonNode source = PgConnectors.source("src-all").table("public.a", "qa").table("public.b", "qb", List.of("x", "y"))
        .tableSinglePartition("public.c", "qc").publication("pub").managePublication(false).maxBundleMessages(10)
        .maxBundleBytes(65_536).snapshotChunkRows(7).snapshot("never").truncates(false).toJsonNode();
    assertThat(source).isEqualTo(M.readTree("""
        {"kind": "source", "source": {"tables": [{"table": "public.a", "queue": "qa"},
           {"table": "public.b", "queue": "qb", "partitionBy": ["x", "y"]},
           {"table": "public.c", "queue": "qc", "partitionBy": "single"}],
         "publication": "pub", "managePublication": false, "maxBundleMessages": 10, "maxBundleBytes": 65536,
         "snapshotChunkRows": 7, "snapshot": "never", "truncates": false}}"""));
    assertThat(PgConnectors.sink("s").queue("q").table("t").mode(SinkMode.APPEND).subscriptionMode("new").toJsonNode()
        .path("sink").path("subscriptionMode").asText()).isEqualTo("new");
  }

  /** The builder's error is the validator's error for the same JSON: same field path, same message. */
  static void refusedAlike(Supplier<Object> build, String name, String json, String field) throws Exception {
    InvalidConnectorException fromJson = catchThrowableOfType(() -> Documents.validate(name, M.readTree(json)),
        InvalidConnectorException.class);
    assertThat(fromJson).as("the hand-written document is refused").isNotNull();
    assertThat(fromJson.field()).isEqualTo(field);
    assertThatThrownBy(build::get).isInstanceOfSatisfying(InvalidConnectorException.class, e -> {
      assertThat(e.field()).isEqualTo(field);
      assertThat(e.getMessage()).isEqualTo(fromJson.getMessage());
    });
  }

  @Test
  void badValuesAreRefusedByTheSameValidatorWithTheSameFieldPath() throws Exception {
    refusedAlike(() -> PgConnectors.sink("s").queue("q").table("t").mode(SinkMode.APPEND).workers(0).toJson(), "s",
        """
        {"kind": "sink", "sink": {"queue": "q", "table": "t", "mode": "append", "workers": 0}}""", "sink.workers");
    refusedAlike(() -> PgConnectors.sink("s").queue("q").table("t").mode(SinkMode.APPEND).maxAttempts(101).toJson(),
        "s", """
        {"kind": "sink", "sink": {"queue": "q", "table": "t", "mode": "append", "maxAttempts": 101}}""",
        "sink.maxAttempts");
    refusedAlike(() -> PgConnectors.sink("s").queue("q").table("t").toJson(), "s", """
        {"kind": "sink", "sink": {"queue": "q", "table": "t"}}""", "sink.mode");
    refusedAlike(() -> PgConnectors.sink("s").queue("q").table("t").mode(SinkMode.UPSERT).statement("select 1")
        .toJson(), "s", """
        {"kind": "sink", "sink": {"queue": "q", "table": "t", "mode": "upsert", "statement": "select 1"}}""",
        "sink.statement");
    refusedAlike(() -> PgConnectors.sink("s").connection(PgConnectors.connection("h", "d", "u").port(70_000)).queue("q")
        .table("t").mode(SinkMode.APPEND).toJson(), "s", """
        {"kind": "sink", "connection": {"host": "h", "database": "d", "user": "u", "port": 70000},
         "sink": {"queue": "q", "table": "t", "mode": "append"}}""", "connection.port");
    refusedAlike(() -> PgConnectors.sink("Bad Name").queue("q").table("t").mode(SinkMode.APPEND).toJson(), "Bad Name",
        """
        {"kind": "sink", "sink": {"queue": "q", "table": "t", "mode": "append"}}""", "name");
    refusedAlike(() -> PgConnectors.source("src").table("public.a", "qa").maxBundleBytes(1).toJson(), "src", """
        {"kind": "source", "source": {"tables": [{"table": "public.a", "queue": "qa"}], "maxBundleBytes": 1}}""",
        "source.maxBundleBytes");
    refusedAlike(() -> PgConnectors.source("src").toJson(), "src", """
        {"kind": "source", "source": {}}""", "source.tables");
  }

  @Test
  void thePasswordIsNeverInToString() {
    PgConnectors.SinkDocument d = PgConnectors.sink("s").connection(pg()).queue("q").table("t").mode(SinkMode.APPEND);
    assertThat(d.toString()).isEqualTo("sink 's'");
    assertThat(pg().toString()).isEqualTo("Connection[host, database, user, password, sslMode]").doesNotContain("secret");
  }
}
