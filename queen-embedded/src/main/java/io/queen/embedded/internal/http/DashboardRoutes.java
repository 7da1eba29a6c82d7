package io.queen.embedded.internal.http;

import static io.queen.embedded.internal.http.Params.bad;
import static io.queen.embedded.internal.http.Params.clip;
import static io.queen.embedded.internal.http.Params.need;
import static io.queen.embedded.internal.http.Params.write;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.DeadLetter;
import io.queen.DeadLetters;
import io.queen.Queen;
import io.queen.Status;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Map;

/**
 * What the dashboard adds to the HTTP surface: the reads of queues and partitions, the dead letters (list, purge,
 * redrive, delete) of {@code /api/v1/queues}, and the dashboard's own files.
 */
final class DashboardRoutes {
  private static final String DASHBOARD = "/io/queen/embedded/internal/http/dashboard/";
  private static final Map<String, String> FILES = Map.of("index.html", "text/html; charset=utf-8",
      "login.html", "text/html; charset=utf-8", "app.js", "text/javascript; charset=utf-8",
      "login.js", "text/javascript; charset=utf-8", "app.css", "text/css; charset=utf-8");

  private final Queen queen;
  private final boolean readOnly;

  DashboardRoutes(Queen queen, boolean readOnly) {
    this.queen = queen;
    this.readOnly = readOnly;
  }

  static boolean isDashboard(String path) {
    return path.equals("/") || path.equals("/dashboard") || path.startsWith("/dashboard/");
  }

  Reply queues(Request r, String m, List<String> rest) {
    if (rest.isEmpty()) {
      need(m, "GET");
      r.allowQuery();
      ArrayNode qs = Views.arr();
      queen.status().queues().forEach(q -> qs.add(Views.queue(q)));
      ObjectNode n = Views.obj();
      n.set("queues", qs);
      return Reply.ok(n);
    }
    String queue = rest.get(0);
    if (rest.size() == 1) {
      need(m, "GET");
      r.allowQuery();
      Status.QueueStatus q = queen.status().queue(queue);
      if (q == null) {
        throw new HttpError(404, "queue_not_found", "no queue '" + clip(queue) + "'");
      }
      return Reply.ok(Views.queue(q));
    }
    if (rest.size() == 2 && rest.get(1).equals("partitions")) {
      need(m, "GET");
      r.allowQuery("after", "limit");
      ArrayNode ps = Views.arr();
      List<Status.PartitionStatus> page = queen.queue(queue).partitions(r.query.get("after"), r.intParam("limit", 100));
      page.forEach(x -> ps.add(Views.partition(x)));
      ObjectNode n = Views.obj();
      n.set("partitions", ps);
      n.put("next", page.size() == r.intParam("limit", 100) ? page.get(page.size() - 1).name() : null);
      return Reply.ok(n);
    }
    if (!rest.get(1).equals("dead-letters")) {
      throw r.notFound();
    }
    DeadLetters.Query dl = deadLetterGroup(queue, r.query.get("consumerGroup"));
    if (rest.size() == 2) {
      switch (m) {
        case "GET" -> {
          r.allowQuery("consumerGroup", "limit", "after");
          int limit = r.intParam("limit", 50);
          Long after = r.query.containsKey("after") ? r.longParam("after") : null;
          ArrayNode items = Views.arr();
          List<DeadLetter> list = dl.list(limit, after);
          list.forEach(d -> items.add(Views.deadLetter(d)));
          ObjectNode n = Views.obj();
          n.set("deadLetters", items);
          n.put("next", list.size() == limit ? list.get(list.size() - 1).id() : null);
          return Reply.ok(n);
        }
        case "DELETE" -> {
          write(readOnly);
          r.allowQuery("consumerGroup");
          return Reply.ok(Views.obj().put("purged", dl.purge()));
        }
        default -> throw new HttpError(405, "method_not_allowed", "this route answers GET, DELETE, not " + m);
      }
    }
    if (rest.size() == 3 && rest.get(2).equals("redrive")) {
      need(m, "POST");
      write(readOnly);
      r.allowQuery("consumerGroup", "id");
      if (!r.query.containsKey("id")) {
        return Reply.ok(Views.obj().put("redriven", dl.redriveAll()));
      }
      long id = r.longParam("id");
      String group = r.query.get("consumerGroup");
      DeadLetter d = new DeadLetter(id, queue, "", 0, 0, group == null || group.isEmpty() ? Queen.DEFAULT_GROUP
          : group, null, null, null, 0, null, 0, null);
      boolean done = dl.redrive(d);
      if (!done) {
        throw new HttpError(404, "dead_letter_not_found", "no dead letter " + id + " in that queue and group");
      }
      return Reply.ok(Views.obj().put("redriven", 1));
    }
    if (rest.size() == 3) {
      need(m, "DELETE");
      write(readOnly);
      r.allowQuery("consumerGroup");
      long id;
      try {
        id = Long.parseLong(rest.get(2));
      } catch (NumberFormatException e) {
        throw bad("id", "a dead letter's id is a number");
      }
      String group = r.query.get("consumerGroup");
      DeadLetter d = new DeadLetter(id, queue, "", 0, 0, group == null || group.isEmpty() ? Queen.DEFAULT_GROUP
          : group, null, null, null, 0, null, 0, null);
      if (!dl.delete(d)) {
        throw new HttpError(404, "dead_letter_not_found", "no dead letter " + id + " in that queue and group");
      }
      return Reply.ok(Views.obj().put("deleted", 1));
    }
    throw r.notFound();
  }

  private DeadLetters.Query deadLetterGroup(String queue, String group) {
    DeadLetters d = queen.deadLetters(queue);
    return group == null || group.isEmpty() ? d.defaultGroup() : d.group(group);
  }

  static Reply file(String name) {
    String type = FILES.get(name);
    if (type == null) {
      throw new HttpError(404, "not_found", "no dashboard file '" + clip(name) + "'");
    }
    try (InputStream in = DashboardRoutes.class.getResourceAsStream(DASHBOARD + name)) {
      if (in == null) {
        throw new HttpError(404, "not_found", "no dashboard file '" + clip(name) + "'");
      }
      return new Reply(200, type, in.readAllBytes());
    } catch (IOException e) {
      throw new HttpError(500, "internal", "the dashboard file could not be read");
    }
  }

  static Reply loginPage() {
    Reply page = file("login.html");
    return new Reply(401, page.contentType(), page.body());
  }
}
