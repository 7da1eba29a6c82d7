package io.queen.embedded.internal.http;

import static io.queen.embedded.internal.http.Params.need;
import static io.queen.embedded.internal.http.Params.write;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.ConnectorStatus;
import io.queen.Queen;
import io.queen.Status;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * The routes: the HTTP surface ({@code /api/v1/push}, {@code /pop}, {@code /ack}, {@code /transaction},
 * {@code /kv}, {@code /connectors}, {@code /status}, {@code /health}, {@code /metrics/prometheus}), the few reads
 * the dashboard adds ({@code /api/v1/queues}, dead letters), and the dashboard's files. This class dispatches each
 * request and answers health, status, metrics and nodes; {@link MessageRoutes}, {@link KvRoutes},
 * {@link ConnectorRoutes} and {@link DashboardRoutes} answer the rest. Every route goes through the public
 * {@link Queen} API, so it validates names and values exactly as a Java caller's call does.
 */
final class Routes {
  private final Queen queen;
  private final boolean readOnly;
  private final BooleanSupplier databaseReady;
  private final Object meterRegistry;
  private final MessageRoutes messages;
  private final KvRoutes kvRoutes;
  private final ConnectorRoutes connectorRoutes;
  private final DashboardRoutes dashboard;

  Routes(Queen queen, boolean readOnly, BooleanSupplier databaseReady, Object meterRegistry) {
    this.queen = queen;
    this.readOnly = readOnly;
    this.databaseReady = databaseReady;
    this.meterRegistry = meterRegistry;
    this.messages = new MessageRoutes(queen);
    this.kvRoutes = new KvRoutes(queen, readOnly);
    this.connectorRoutes = new ConnectorRoutes(queen, readOnly);
    this.dashboard = new DashboardRoutes(queen, readOnly);
  }

  Reply route(Request r) {
    List<String> p = Params.segments(r.path);
    String m = r.method.equals("HEAD") ? "GET" : r.method;
    if (DashboardRoutes.isDashboard(r.path)) {
      need(m, "GET");
      return DashboardRoutes.file(p.size() <= 1 ? "index.html" : String.join("/", p.subList(1, p.size())));
    }
    if (p.size() >= 1 && p.get(0).equals("health")) {
      need(m, "GET");
      return health(p.size() == 1 ? "live" : p.get(1));
    }
    if (p.equals(List.of("metrics", "prometheus"))) {
      need(m, "GET");
      return prometheus();
    }
    if (p.size() < 3 || !p.get(0).equals("api") || !p.get(1).equals("v1")) {
      throw r.notFound();
    }
    String what = p.get(2);
    List<String> rest = p.subList(3, p.size());
    switch (what) {
      case "status":
        need(m, "GET");
        r.allowQuery();
        return status();
      case "push":
        need(m, "POST");
        write(readOnly);
        return messages.push(r);
      case "pop":
        need(m, "GET");
        write(readOnly);
        return messages.pop(r, rest);
      case "ack":
        need(m, "POST");
        write(readOnly);
        return messages.ack(r, rest);
      case "transaction":
        need(m, "POST");
        write(readOnly);
        return kvRoutes.transaction(r);
      case "kv":
        return kvRoutes.kv(r, m, rest);
      case "connectors":
        return connectorRoutes.connectors(r, m, rest);
      case "queues":
        return dashboard.queues(r, m, rest);
      case "nodes":
        need(m, "GET");
        r.allowQuery();
        return Reply.ok(Views.obj().set("nodes", Views.nodes(queen.status().nodes())));
      default:
        throw r.notFound();
    }
  }

  // ------------------------------------------------------------------------------------- health, status, metrics

  private Reply health(String which) {
    if (which.equals("live")) {
      return Reply.ok(Views.obj().put("status", "ok").put("node", queen.nodeId()));
    }
    if (!which.equals("ready")) {
      throw new HttpError(404, "not_found", "health checks: /health/live, /health/ready");
    }
    boolean db = databaseReady.getAsBoolean();
    int inError = 0;
    boolean connectors = true;
    try {
      for (ConnectorStatus c : queen.connectors().status()) {
        if ("error".equals(c.phase())) {
          inError++;
        }
      }
    } catch (UnsupportedOperationException e) {
      connectors = false; // no queen-pgconn on the classpath: nothing to be in error
    } catch (RuntimeException e) {
      db = false;
    }
    boolean ready = db && inError == 0;
    ObjectNode checks = Views.obj().put("database", db).put("migrations", true).put("connectorsInError", inError)
        .put("connectorsAvailable", connectors);
    ObjectNode n = Views.obj().put("status", ready ? "ready" : "not_ready").put("node", queen.nodeId());
    n.set("checks", checks);
    return Reply.json(ready ? 200 : 503, n);
  }

  private Reply status() {
    Status st = queen.status();
    return Reply.ok(Views.status(st, queen.nodeId(), st.connectors()).put("readOnly", readOnly));
  }

  private Reply prometheus() {
    if (meterRegistry != null && meterRegistry.getClass().getSimpleName().equals("PrometheusMeterRegistry")) {
      try {
        Object text = meterRegistry.getClass().getMethod("scrape").invoke(meterRegistry);
        return new Reply(200, "text/plain; version=0.0.4; charset=utf-8",
            String.valueOf(text).getBytes(StandardCharsets.UTF_8));
      } catch (ReflectiveOperationException e) {
        throw new HttpError(500, "metrics_failed", "the Prometheus registry could not be scraped");
      }
    }
    throw new HttpError(404, "metrics_unavailable", "this node has no Prometheus registry: give the builder a"
        + " PrometheusMeterRegistry (micrometer-registry-prometheus) as meterRegistry(...)");
  }
}
