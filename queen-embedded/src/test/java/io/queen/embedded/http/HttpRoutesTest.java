package io.queen.embedded.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.HttpCalls;
import io.queen.testkit.HttpCalls.Answer;
import io.queen.testkit.QueenPostgres;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every route of the HTTP surface against a real PostgreSQL: the shapes and status codes, and bad input (malformed
 * JSON, unknown fields, oversized bodies, a wrong credential, read-only) answered with a clear 4xx that changes
 * nothing.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HttpRoutesTest {
  static final String TOKEN = "t0ken-for-the-http-tests";
  Queen queen;
  HttpCalls http;

  Queen start(DataSource ds, HttpOptions options) {
    queen = EmbeddedQueen.builder().dataSource(ds).http(options).start();
    http = new HttpCalls(EmbeddedQueen.httpAddress(queen).orElseThrow());
    return queen;
  }

  @AfterEach
  void stop() {
    if (queen != null) {
      queen.close();
    }
  }

  @Test
  void pushPopAckOverHttp(DataSource ds) {
    start(ds, HttpOptions.port(0));
    Answer pushed = http.post("/api/v1/push", """
        {"items":[{"queue":"orders","partition":"7","payload":{"id":7,"total":12.50}},
                  {"queue":"orders","partition":"7","payload":{"id":8},"transactionId":"t-8"},
                  {"queue":"orders","partition":"7","payload":{"id":8},"transactionId":"t-8"}]}""");
    assertThat(pushed.status()).isEqualTo(201);
    assertThat(pushed.json()).hasSize(3);
    assertThat(pushed.json().get(0).get("status").asText()).isEqualTo("queued");
    assertThat(pushed.json().get(0).get("offset").asLong()).isZero();
    assertThat(pushed.json().get(2).get("status").asText()).isEqualTo("duplicate");

    Answer popped = http.get("/api/v1/pop/queue/orders?batch=10&partitions=10");
    assertThat(popped.status()).isEqualTo(200);
    JsonNode msgs = popped.json().get("messages");
    assertThat(msgs).hasSize(2);
    JsonNode first = msgs.get(0);
    assertThat(first.get("partition").asText()).isEqualTo("7");
    assertThat(popped.body()).contains("\"data\":{\"id\":7,\"total\":12.50}"); // the digits as pushed
    assertThat(first.get("leaseId").asText()).isNotEmpty();
    assertThat(first.get("consumerGroup").asText()).isEqualTo(Queen.DEFAULT_GROUP);

    Answer acked = http.post("/api/v1/ack", first.toString());
    assertThat(acked.status()).as(acked.toString()).isEqualTo(200);
    assertThat(acked.json().get("outcome").asText()).isEqualTo("acked");
    assertThat(acked.json().get("success").asBoolean()).isTrue();

    // the second message fails back (retry) through the batch route
    String failed = ((com.fasterxml.jackson.databind.node.ObjectNode) msgs.get(1).deepCopy()).put("status", "failed")
        .put("error", "card declined").toString();
    Answer batch = http.post("/api/v1/ack/batch", "{\"acknowledgments\":[" + failed + "]}");
    assertThat(batch.status()).as(batch.toString()).isEqualTo(200);
    assertThat(batch.json().get("results").get(0).get("outcome").asText()).isEqualTo("retry_scheduled");

    // acked twice: a clear outcome, as the Java API reports it
    Answer again = http.post("/api/v1/ack", first.toString());
    assertThat(again.json().get("outcome").asText()).isEqualTo("already_acked");

    // a named group with subscriptionMode=all and autoAck
    Answer group = http.get("/api/v1/pop/queue/orders/partition/7?consumerGroup=audit&subscriptionMode=all"
        + "&autoAck=true&batch=5");
    assertThat(group.json().get("messages")).hasSize(2);
    assertThat(group.json().get("messages").get(0).get("leaseId").isNull()).isTrue();

    // wait: an empty pop waits and returns empty
    long t0 = System.nanoTime();
    Answer waited = http.get("/api/v1/pop/queue/orders?consumerGroup=audit&wait=true&timeout=300");
    assertThat(waited.json().get("messages")).isEmpty();
    assertThat(System.nanoTime() - t0).isGreaterThan(TimeUnit.MILLISECONDS.toNanos(250));
  }

  @Test
  void statusQueuesAndHealth(DataSource ds) {
    start(ds, HttpOptions.port(0));
    queen.queue("jobs").partition("a").push(java.util.Map.of("n", 1));
    queen.queue("jobs").partition("b").push(java.util.Map.of("n", 2));
    queen.queue("jobs").group("g").subscription(io.queen.SubscriptionMode.ALL).pop();

    Answer st = http.get("/api/v1/status");
    assertThat(st.status()).isEqualTo(200);
    JsonNode q = null;
    for (JsonNode each : st.json().get("queues")) {
      q = each.get("name").asText().equals("jobs") ? each : q;
    }
    assertThat(q.get("name").asText()).isEqualTo("jobs");
    assertThat(q.get("partitions").asLong()).isEqualTo(2);
    assertThat(st.json().get("pg").get("connectors").isArray()).isTrue();
    assertThat(st.json().get("node").asText()).isEqualTo(queen.nodeId());

    Answer queues = http.get("/api/v1/queues");
    JsonNode jobs = http.get("/api/v1/queues/jobs").json();
    assertThat(jobs.get("lag").asLong()).isEqualTo(2); // g's: its leased message is not done yet
    assertThat(jobs.get("groups").get(0).get("name").asText()).isEqualTo("g");
    assertThat(jobs.get("groups").get(0).get("leases").asLong()).isEqualTo(1);
    assertThat(queues.json().get("queues").isArray()).isTrue();
    assertThat(http.get("/api/v1/queues/nope").status()).isEqualTo(404);

    assertThat(http.get("/health").json().get("status").asText()).isEqualTo("ok");
    Answer ready = http.get("/health/ready");
    assertThat(ready.status()).isEqualTo(200);
    assertThat(ready.json().get("checks").get("database").asBoolean()).isTrue();
    assertThat(http.get("/metrics/prometheus").json().get("code").asText()).isEqualTo("metrics_unavailable");
  }

  @Test
  void partitionsWithTheirCursorsAndNodesWithTheirLeases(DataSource ds) {
    start(ds, HttpOptions.port(0));
    for (String p : List.of("a", "b", "c")) {
      queen.queue("parts").partition(p).push(java.util.Map.of("p", p));
    }
    List<Message> leased = queen.queue("parts").group("g").subscription(io.queen.SubscriptionMode.ALL).pop();
    assertThat(leased).hasSize(1);

    JsonNode page = http.get("/api/v1/queues/parts/partitions?limit=2").json();
    assertThat(page.get("partitions")).extracting(p -> p.get("name").asText()).containsExactly("a", "b");
    assertThat(page.get("next").asText()).isEqualTo("b");
    JsonNode a = page.get("partitions").get(0);
    assertThat(a.get("nextOffset").asLong()).isEqualTo(1);
    assertThat(a.get("cursors").get(0).get("consumerGroup").asText()).isEqualTo("g");
    assertThat(a.get("cursors").get(0).get("leaseOwner").asText()).isEqualTo(queen.nodeId());
    assertThat(a.get("cursors").get(0).get("lag").asLong()).isEqualTo(1);
    JsonNode rest = http.get("/api/v1/queues/parts/partitions?after=b").json();
    assertThat(rest.get("partitions")).extracting(p -> p.get("name").asText()).containsExactly("c");
    assertThat(rest.get("next").isNull()).isTrue();
    assertThat(http.get("/api/v1/queues/nope/partitions").json().get("partitions")).isEmpty();

    JsonNode nodes = http.get("/api/v1/nodes").json().get("nodes");
    JsonNode me = null;
    for (JsonNode n : nodes) {
      me = n.get("id").asText().equals(queen.nodeId()) ? n : me;
    }
    assertThat(me).isNotNull();
    assertThat(me.get("alive").asBoolean()).isTrue();
    assertThat(me.get("leases").asLong()).isEqualTo(1);
    assertThat(http.get("/api/v1/queues/parts").json().get("pushed").asLong()).isEqualTo(3);
  }

  @Test
  void kvCompleteSurfaceAndSugar(DataSource ds) {
    start(ds, HttpOptions.port(0));
    Answer put = http.post("/api/v1/kv", """
        {"op":"put","namespace":"quota","key":"acme","value":{"n":1},"ttlSeconds":60}""");
    assertThat(put.status()).isEqualTo(200);
    assertThat(put.json().get("applied").asBoolean()).isTrue();
    assertThat(put.json().get("version").asLong()).isEqualTo(1);

    Answer lost = http.post("/api/v1/kv", """
        {"op":"putIfAbsent","namespace":"quota","key":"acme","value":2,"forever":true}""");
    assertThat(lost.status()).isEqualTo(200);
    assertThat(lost.json().get("applied").asBoolean()).isFalse();
    assertThat(lost.json().get("reason").asText()).isEqualTo("exists");
    assertThat(lost.json().get("value").toString()).isEqualTo("{\"n\":1}");

    Answer incr = http.post("/api/v1/kv", """
        {"op":"incr","namespace":"quota","key":"calls","delta":5,"max":6,"ttlSeconds":60}""");
    assertThat(incr.json().get("value").asLong()).isEqualTo(5);
    Answer limit = http.post("/api/v1/kv", """
        {"op":"incr","namespace":"quota","key":"calls","delta":5,"max":6,"ttlSeconds":60}""");
    assertThat(limit.json().get("applied").asBoolean()).isFalse();
    assertThat(limit.json().get("reason").asText()).isEqualTo("limit");

    Answer prefix = http.post("/api/v1/kv", """
        {"op":"getPrefix","namespace":"quota","prefix":"a","limit":10}""");
    assertThat(prefix.json().get("rows")).hasSize(1);
    assertThat(prefix.json().get("truncated").asBoolean()).isFalse();
    Answer many = http.post("/api/v1/kv", """
        {"op":"getMany","namespace":"quota","keys":["acme","nope"]}""");
    assertThat(many.json().get("rows").get(1).get("found").asBoolean()).isFalse();

    // sugar: GET, PUT, DELETE on /api/v1/kv/<ns>/<key>, keys with slashes
    assertThat(http.put("/api/v1/kv/quota/a/b?forever=true", "\"v\"").json().get("applied").asBoolean()).isTrue();
    Answer got = http.get("/api/v1/kv/quota/a/b");
    assertThat(got.json().get("found").asBoolean()).isTrue();
    assertThat(got.json().get("value").asText()).isEqualTo("v");
    assertThat(http.delete("/api/v1/kv/quota/a/b").json().get("applied").asBoolean()).isTrue();
    assertThat(http.get("/api/v1/kv/quota/a/b").json().get("found").asBoolean()).isFalse();

    // the expiry rule: zero or two of ttlSeconds / forever is a 400
    Answer none = http.post("/api/v1/kv", "{\"op\":\"put\",\"namespace\":\"quota\",\"key\":\"x\",\"value\":1}");
    assertThat(none.status()).isEqualTo(400);
    Answer both = http.post("/api/v1/kv",
        "{\"op\":\"put\",\"namespace\":\"quota\",\"key\":\"x\",\"value\":1,\"ttlSeconds\":5,\"forever\":true}");
    assertThat(both.status()).isEqualTo(400);
    // namespaces are validated as in the Java API
    Answer badNs = http.post("/api/v1/kv", "{\"op\":\"get\",\"namespace\":\"no spaces\",\"key\":\"x\"}");
    assertThat(badNs.status()).isEqualTo(400);
    assertThat(queen.kv().get("quota", "x").found()).isFalse();
  }

  @Test
  void transactionIsOneCommitAndTheKvVerdictIsA200(DataSource ds) {
    start(ds, HttpOptions.port(0));
    queen.queue("pay").partition("1").push(java.util.Map.of("order", 1));
    JsonNode msg = http.get("/api/v1/pop/queue/pay").json().get("messages").get(0);
    String ack = ((com.fasterxml.jackson.databind.node.ObjectNode) msg.deepCopy()).put("op", "ack").toString();
    String bundle = "{\"operations\":[{\"op\":\"once\",\"namespace\":\"charges\",\"key\":\"charge:1\","
        + "\"ttlSeconds\":86400,\"required\":true}," + ack + ",{\"op\":\"push\",\"queue\":\"receipts\","
        + "\"partition\":\"1\",\"payload\":{\"order\":1}}]}";
    Answer first = http.post("/api/v1/transaction", bundle);
    assertThat(first.status()).as(first.toString()).isEqualTo(200);
    assertThat(first.json().get("success").asBoolean()).isTrue();
    assertThat(first.json().get("pushes")).hasSize(1);

    // a redelivery of the same work: the marker is there, nothing in the bundle commits
    queen.queue("pay").partition("1").push(java.util.Map.of("order", 1));
    JsonNode again = http.get("/api/v1/pop/queue/pay").json().get("messages").get(0);
    String ack2 = ((com.fasterxml.jackson.databind.node.ObjectNode) again.deepCopy()).put("op", "ack").toString();
    Answer verdict = http.post("/api/v1/transaction", bundle.replace(ack, ack2));
    assertThat(verdict.status()).isEqualTo(200);
    assertThat(verdict.json().get("success").asBoolean()).isFalse();
    assertThat(verdict.json().get("reason").asText()).isEqualTo("kv_precondition");
    assertThat(queen.queue("receipts").consumer().batch(10).pop()).hasSize(1); // the first bundle's only
  }

  @Test
  void deadLettersListRedriveAndDelete(DataSource ds) {
    start(ds, HttpOptions.port(0));
    queen.queue("dl").configure(c -> c.retryLimit(0));
    queen.queue("dl").partition("p").push(java.util.Map.of("n", 1));
    queen.queue("dl").partition("p").push(java.util.Map.of("n", 2));
    for (int i = 0; i < 2; i++) {
      List<Message> m = queen.queue("dl").consumer().pop();
      queen.ack(m.get(0), AckStatus.DEAD_LETTER, "boom " + i);
    }
    Answer list = http.get("/api/v1/queues/dl/dead-letters");
    assertThat(list.status()).isEqualTo(200);
    JsonNode letters = list.json().get("deadLetters");
    assertThat(letters).hasSize(2);
    assertThat(letters.get(0).get("error").asText()).isEqualTo("boom 0");

    long first = letters.get(0).get("id").asLong();
    long second = letters.get(1).get("id").asLong();
    assertThat(http.post("/api/v1/queues/dl/dead-letters/redrive?id=" + first, "").status()).isEqualTo(200);
    assertThat(queen.queue("dl").consumer().pop()).extracting(m -> m.payload().get("n").asInt()).containsExactly(1);
    assertThat(http.delete("/api/v1/queues/dl/dead-letters/" + second).status()).isEqualTo(200);
    assertThat(http.get("/api/v1/queues/dl/dead-letters").json().get("deadLetters")).isEmpty();
    assertThat(http.delete("/api/v1/queues/dl/dead-letters/" + second).status()).isEqualTo(404);
  }

  @Test
  void badInputIsAClear4xxAndChangesNothing(DataSource ds) {
    start(ds, HttpOptions.port(0).maxBodyBytes(2048));
    Answer malformed = http.post("/api/v1/push", "{\"items\":[{\"queue\":\"x\",");
    assertThat(malformed.status()).isEqualTo(400);
    assertThat(malformed.json().get("code").asText()).isEqualTo("invalid_json");

    Answer unknown = http.post("/api/v1/push", "{\"items\":[{\"queue\":\"x\",\"payload\":1,\"colour\":\"red\"}]}");
    assertThat(unknown.status()).isEqualTo(400);
    assertThat(unknown.json().get("code").asText()).isEqualTo("unknown_field");
    assertThat(unknown.json().get("field").asText()).isEqualTo("items[0].colour");

    Answer dup = http.post("/api/v1/push", "{\"items\":[{\"queue\":\"x\",\"payload\":1,\"payload\":2}]}");
    assertThat(dup.status()).isEqualTo(400);

    String big = "{\"items\":[{\"queue\":\"x\",\"payload\":\"" + "s3cr3t".repeat(1000) + "\"}]}";
    Answer tooBig = http.post("/api/v1/push", big);
    assertThat(tooBig.status()).isEqualTo(413);
    assertThat(tooBig.body()).doesNotContain("s3cr3t");

    Answer badName = http.post("/api/v1/push", "{\"items\":[{\"queue\":\"bad name!\",\"payload\":1}]}");
    assertThat(badName.status()).isEqualTo(400);
    Answer noType = http.send("POST", "/api/v1/push", "text/plain", "{\"items\":[]}".getBytes(StandardCharsets.UTF_8));
    assertThat(noType.status()).isEqualTo(415);
    Answer badParam = http.get("/api/v1/pop/queue/x?batchSize=3");
    assertThat(badParam.status()).isEqualTo(400);
    assertThat(http.get("/api/v1/pop/queue/x?batch=0").status()).isEqualTo(400);
    assertThat(http.get("/api/v1/nothing").status()).isEqualTo(404);
    assertThat(http.delete("/api/v1/push").status()).isEqualTo(405);
    // a payload never comes back in an error: an invalid JSON body does not echo its text
    Answer echo = http.post("/api/v1/push", "{\"items\":[{\"queue\":\"x\",\"payload\":s3cr3t}]}");
    assertThat(echo.status()).isEqualTo(400);
    assertThat(echo.body()).doesNotContain("s3cr3t");
    assertThat(queen.status().queue("x")).isNull();
  }

  @Test
  void aCredentialIsNeededByEveryRouteButHealth(DataSource ds) {
    start(ds, HttpOptions.port(0).token(TOKEN));
    assertThat(http.get("/api/v1/status").status()).isEqualTo(401);
    assertThat(http.post("/api/v1/push", "{\"items\":[{\"queue\":\"x\",\"payload\":1}]}").status()).isEqualTo(401);
    assertThat(http.auth("Bearer wrong-token-wrong-token").get("/api/v1/status").status()).isEqualTo(401);
    assertThat(http.auth(null).get("/health").status()).isEqualTo(200);
    assertThat(http.get("/health/ready").status()).isEqualTo(200);
    assertThat(queen.status().queue("x")).isNull();
    assertThat(http.auth("Bearer " + TOKEN).get("/api/v1/status").status()).isEqualTo(200);
    assertThat(http.post("/api/v1/push", "{\"items\":[{\"queue\":\"x2\",\"payload\":1}]}").status()).isEqualTo(201);
  }

  @Test
  void withATokenTheDashboardAsksForItAndTakesItFromItsCookie(DataSource ds) {
    start(ds, HttpOptions.port(0).token(TOKEN));
    Answer page = http.get("/");
    assertThat(page.status()).isEqualTo(401);
    assertThat(page.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("text/html"));
    assertThat(page.body()).contains("id=\"login\"").doesNotContain("queue-table");
    assertThat(http.get("/dashboard/login.js").status()).isEqualTo(200); // the sign-in page's own script
    assertThat(http.get("/dashboard/app.js").body()).doesNotContain("refresh"); // the rest is the sign-in page
    http.auth(null);
    Answer withCookie = http.send("GET", "/", null, new byte[0], "Cookie", "queen_token=" + TOKEN);
    assertThat(withCookie.status()).isEqualTo(200);
    assertThat(withCookie.body()).contains("queue-table");
    assertThat(http.send("GET", "/api/v1/status", null, new byte[0], "Cookie", "queen_token=nope-nope-nope-nope")
        .status()).isEqualTo(401);
    assertThat(http.get("/dashboard/nothing.js").status()).isEqualTo(401);
  }

  @Test
  void prometheusMetricsWhenTheRegistryIsPrometheus(DataSource ds) {
    var registry = new io.micrometer.prometheusmetrics.PrometheusMeterRegistry(
        io.micrometer.prometheusmetrics.PrometheusConfig.DEFAULT);
    queen = EmbeddedQueen.builder().dataSource(ds).meterRegistry(registry).http(HttpOptions.port(0)).start();
    http = new HttpCalls(EmbeddedQueen.httpAddress(queen).orElseThrow());
    queen.queue("metered").partition("p").push(java.util.Map.of("n", 1));
    Answer m = http.get("/metrics/prometheus");
    assertThat(m.status()).isEqualTo(200);
    assertThat(m.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("text/plain"));
    assertThat(m.body()).contains("queen_");
  }

  @Test
  void basicAuthAndReadOnly(DataSource ds) {
    start(ds, HttpOptions.port(0).basicAuth("ops", "correct-horse").readOnly(true));
    String good = "Basic " + Base64.getEncoder().encodeToString("ops:correct-horse".getBytes(StandardCharsets.UTF_8));
    String bad = "Basic " + Base64.getEncoder().encodeToString("ops:wrong-horse".getBytes(StandardCharsets.UTF_8));
    Answer refused = http.auth(bad).get("/api/v1/status");
    assertThat(refused.status()).isEqualTo(401);
    assertThat(refused.headers().firstValue("WWW-Authenticate")).hasValueSatisfying(v -> assertThat(v).startsWith("Basic"));
    http.auth(good);
    assertThat(http.get("/api/v1/status").status()).isEqualTo(200);
    Answer push = http.post("/api/v1/push", "{\"items\":[{\"queue\":\"x\",\"payload\":1}]}");
    assertThat(push.status()).isEqualTo(403);
    assertThat(push.json().get("code").asText()).isEqualTo("read_only");
    assertThat(http.get("/api/v1/pop/queue/x").status()).isEqualTo(403);
    assertThat(http.post("/api/v1/kv", "{\"op\":\"put\",\"namespace\":\"n\",\"key\":\"k\",\"value\":1,\"forever\":true}")
        .status()).isEqualTo(403);
    assertThat(http.post("/api/v1/kv", "{\"op\":\"get\",\"namespace\":\"n\",\"key\":\"k\"}").status()).isEqualTo(200);
    assertThat(queen.status().queue("x")).isNull();
    assertThat(queen.kv().get("n", "k").found()).isFalse();
  }

  @Test
  void theBuilderRefusesAnOpenBindWithoutACredential(DataSource ds) {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).http(HttpOptions.port(0).bindAddress("0.0.0.0"))
        .start()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not loopback");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).http(HttpOptions.port(0).token("short")).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("http token");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).http(HttpOptions.port(70000)).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("http port");
  }

  @Test
  void aPortInUseFailsTheStartAndLeavesNothingRunning(DataSource ds) {
    start(ds, HttpOptions.port(0));
    int taken = EmbeddedQueen.httpAddress(queen).orElseThrow().getPort();
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).nodeId("second").http(HttpOptions.port(taken))
        .start()).isInstanceOf(IllegalStateException.class).hasMessageContaining("cannot listen")
        .hasMessageContaining(String.valueOf(taken));
    assertThat(http.get("/health").status()).isEqualTo(200); // the first node's server is untouched
  }

  @Test
  void closingTheNodeClosesTheServer(DataSource ds) {
    start(ds, HttpOptions.port(0));
    assertThat(http.get("/health").status()).isEqualTo(200);
    queen.close();
    assertThatThrownBy(() -> http.get("/health")).isInstanceOf(AssertionError.class);
    queen = null;
  }
}
