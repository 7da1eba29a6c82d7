package io.queen.examples;

import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.SubscriptionMode;
import io.queen.embedded.EmbeddedQueen;
import io.queen.embedded.http.HttpOptions;
import java.util.Map;

/**
 * The HTTP surface and the operator's dashboard: a node started with {@code http(...)}, some traffic (pushes into two
 * queues, a group that reads behind, a dead letter), and the address to open in a browser or to curl:
 *
 * <pre>
 * curl -s -X POST localhost:6632/api/v1/push -H 'content-type: application/json' \
 *   -d '{"items":[{"queue":"orders","partition":"7","payload":{"id":7}}]}'
 * curl -s 'localhost:6632/api/v1/pop/queue/orders?batch=10&amp;partitions=10&amp;consumerGroup=reader&amp;subscriptionMode=all&amp;autoAck=true'
 * </pre>
 *
 * <p>Port {@code QUEEN_HTTP_PORT} (default 6632), loopback only. Runs until interrupted (Ctrl-C). Runs against
 * {@code QUEEN_JDBC_URL} when set, else an embedded PostgreSQL 17.
 */
public final class HttpDashboardMain {
  private HttpDashboardMain() {}

  public static void main(String[] args) throws Exception {
    String port = System.getenv("QUEEN_HTTP_PORT");
    try (Example db = Example.database("http_dashboard");
        Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("dashboard")
            .http(HttpOptions.port(port == null ? HttpOptions.DEFAULT_PORT : Integer.parseInt(port))).start()) {
      System.out.println("Queen started on " + db.description());
      for (int i = 0; i < 20; i++) {
        queen.queue("orders").partition("customer-" + (i % 4)).push(Map.of("order", i, "total", 10 + i));
      }
      queen.queue("orders").group("billing").subscription(SubscriptionMode.ALL).batch(5).autoAck(true).pop();
      queen.queue("payments").configure(c -> c.retryLimit(0));
      queen.queue("payments").partition("acct-9").push(Map.of("amount", 12));
      Message m = queen.queue("payments").consumer().pop().get(0);
      queen.ack(m, AckStatus.DEAD_LETTER, "card declined: insufficient funds");
      int p = EmbeddedQueen.httpAddress(queen).orElseThrow().getPort();
      System.out.println("Dashboard: http://127.0.0.1:" + p + "/   API: http://127.0.0.1:" + p + "/api/v1/status");
      System.out.println("Ctrl-C to stop");
      Runtime.getRuntime().addShutdownHook(new Thread(queen::close, "close-queen")); // close() is idempotent
      Thread.currentThread().join();
    }
  }
}
