package io.queen.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.AckResult;
import io.queen.Json;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.bench.ThroughputRunner.Result;
import io.queen.bench.ThroughputRunner.Window;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.http.HttpOptions;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * {@code RATIO http_vs_java}: push and pop over the node's HTTP surface on loopback, against the same calls through
 * the Java API, same node, same run. Each of {@value QueenBenchmark#THREADS} threads owns a partition and repeats
 * one cycle: push 10 messages, pop them (batch 10) and ack them, so a cycle is three calls on either side
 * ({@code POST /api/v1/push}, {@code GET /api/v1/pop/queue/<q>/partition/<p>}, {@code POST /api/v1/ack/batch}, with
 * one {@code java.net.http} client per thread and the JSON parsed as a client would). The figure is acked messages
 * per second; the two sides run in ABBA order (Java, HTTP, HTTP, Java), each for half the window, after an
 * untimed warm-up of each.
 */
final class HttpBench {
  private static final int BATCH = 10;
  private static final ObjectMapper JSON = new ObjectMapper();

  private final QueenBenchmark bench;

  HttpBench(QueenBenchmark bench) {
    this.bench = bench;
  }

  void httpVsJava() throws Exception {
    HikariDataSource pool = bench.db().newDataSource(QueenBenchmark.THREADS * 2 + 2);
    String q = "bench-http-" + Long.toHexString(System.nanoTime());
    try (Queen node = EmbeddedQueen.builder().dataSource(pool).nodeId("bench-http")
        .http(HttpOptions.port(0).threads(QueenBenchmark.THREADS)).start()) {
      String base = "http://127.0.0.1:" + EmbeddedQueen.httpAddress(node).orElseThrow().getPort();
      ThroughputRunner.WorkerFactory viaJava = i -> javaCycle(node, q, "j" + i);
      ThroughputRunner.WorkerFactory viaHttp = i -> httpCycle(base, q, "h" + i);
      Duration half = bench.options().window().dividedBy(2);
      Window warm = Window.timed(Duration.ZERO, bench.options().warmup().isZero()
          ? Duration.ofMillis(200) : bench.options().warmup());
      Window window = Window.timed(Duration.ZERO, half);
      ThroughputRunner.run("java-warm", QueenBenchmark.THREADS, viaJava, warm);
      ThroughputRunner.run("http-warm", QueenBenchmark.THREADS, viaHttp, warm);
      bench.settle();
      Result j = ThroughputRunner.run("java-1", QueenBenchmark.THREADS, viaJava, window);
      Result h = ThroughputRunner.run("http-1", QueenBenchmark.THREADS, viaHttp, window);
      h = h.plus(ThroughputRunner.run("http-2", QueenBenchmark.THREADS, viaHttp, window));
      j = j.plus(ThroughputRunner.run("java-2", QueenBenchmark.THREADS, viaJava, window));
      QueenBenchmark.say(String.format(Locale.ROOT, "  %-40s %,12.0f msgs/s  (%,d messages in %.2f s)",
          "Java API: push 10, pop 10, ack 10", j.perSecond(), j.messages(), j.seconds()));
      QueenBenchmark.say(String.format(Locale.ROOT, "  %-40s %,12.0f msgs/s  (%,d messages in %.2f s)",
          "HTTP on loopback: the same three calls", h.perSecond(), h.messages(), h.seconds()));
      double ratio = h.perSecond() / j.perSecond();
      bench.row("http_vs_java", QueenBenchmark.num(h.perSecond(), 0), QueenBenchmark.num(j.perSecond(), 0), "msgs/s",
          QueenBenchmark.num(ratio, 3), "< 1 (report)", ratio < 1 ? "met" : "MISSED", QueenBenchmark.THREADS
          + " threads, one partition each: push " + BATCH + ", pop " + BATCH + ", ack " + BATCH
          + " per cycle; HTTP over loopback vs the Java API on the same node; ABBA halves of the window");
      bench.line("RATIO http_vs_java " + QueenBenchmark.num(ratio, 3));
      bench.line(QueenBenchmark.figure("http_push_pop_ack_msgs_per_s", h.perSecond(), "msgs/s"));
      bench.line(QueenBenchmark.figure("java_push_pop_ack_msgs_per_s", j.perSecond(), "msgs/s"));
      bench.deleteQueue(node, q);
    } finally {
      pool.close();
    }
  }

  private ThroughputRunner.Worker javaCycle(Queen node, String q, String partition) {
    SplittableRandom random = new SplittableRandom(partition.hashCode());
    return () -> {
      List<PushItem> items = new ArrayList<>(BATCH);
      for (int k = 0; k < BATCH; k++) {
        items.add(PushItem.to(q, partition, Json.of(bench.payloads().get(random.nextInt()))));
      }
      node.push(items);
      List<Message> got = node.queue(q).consumer().partition(partition).batch(BATCH).pop();
      if (got.isEmpty()) {
        return 0;
      }
      int ok = 0;
      for (AckResult r : node.ack(got)) {
        ok += r.success() ? 1 : 0;
      }
      return ok;
    };
  }

  private ThroughputRunner.Worker httpCycle(String base, String q, String partition) {
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    SplittableRandom random = new SplittableRandom(partition.hashCode());
    URI push = URI.create(base + "/api/v1/push");
    URI pop = URI.create(base + "/api/v1/pop/queue/" + q + "/partition/" + partition + "?batch=" + BATCH);
    URI ack = URI.create(base + "/api/v1/ack/batch");
    String head = "{\"queue\":\"" + q + "\",\"partition\":\"" + partition + "\",\"payload\":";
    return () -> {
      StringBuilder body = new StringBuilder("{\"items\":[");
      for (int k = 0; k < BATCH; k++) {
        body.append(k == 0 ? "" : ",").append(head).append(bench.payloads().get(random.nextInt())).append('}');
      }
      body.append("]}");
      check(client.send(HttpRequest.newBuilder(push).header("Content-Type", "application/json")
          .POST(HttpRequest.BodyPublishers.ofString(body.toString())).build(), HttpResponse.BodyHandlers.ofString()), 201);
      HttpResponse<byte[]> popped = client.send(HttpRequest.newBuilder(pop).GET().build(),
          HttpResponse.BodyHandlers.ofByteArray());
      check(popped, 200);
      JsonNode messages = JSON.readTree(popped.body()).get("messages");
      if (messages.isEmpty()) {
        return 0;
      }
      ArrayNode acks = JSON.createArrayNode();
      for (JsonNode m : messages) {
        ObjectNode a = ((ObjectNode) m).deepCopy();
        a.remove("data");
        acks.add(a);
      }
      ObjectNode req = JSON.createObjectNode();
      req.set("acknowledgments", acks);
      HttpResponse<byte[]> acked = client.send(HttpRequest.newBuilder(ack).header("Content-Type", "application/json")
          .POST(HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(req))).build(),
          HttpResponse.BodyHandlers.ofByteArray());
      check(acked, 200);
      int ok = 0;
      for (JsonNode r : JSON.readTree(acked.body()).get("results")) {
        ok += r.get("success").asBoolean() ? 1 : 0;
      }
      return ok;
    };
  }

  private static void check(HttpResponse<?> r, int expected) {
    if (r.statusCode() != expected) {
      Object b = r.body();
      throw new IllegalStateException("HTTP " + r.statusCode() + ": " + (b instanceof byte[] bytes
          ? new String(bytes, java.nio.charset.StandardCharsets.UTF_8) : b));
    }
  }
}
