package io.queen.embedded.internal.http;

import static io.queen.embedded.internal.http.Params.clip;
import static io.queen.embedded.internal.http.Params.need;
import static io.queen.embedded.internal.http.Params.write;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.ConnectorStatus;
import io.queen.Queen;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The connector routes: {@code /api/v1/connectors}, list, read, store, delete, pause, resume and resync. */
final class ConnectorRoutes {
  private final Queen queen;
  private final boolean readOnly;

  ConnectorRoutes(Queen queen, boolean readOnly) {
    this.queen = queen;
    this.readOnly = readOnly;
  }

  Reply connectors(Request r, String m, List<String> rest) {
    r.allowQuery();
    if (rest.isEmpty()) {
      need(m, "GET");
      ArrayNode list = Views.arr();
      Map<String, ConnectorStatus> st = new LinkedHashMap<>();
      queen.connectors().status().forEach(s -> st.put(s.name(), s));
      for (String name : queen.connectors().list()) {
        ObjectNode n = Views.obj().put("name", name);
        ConnectorStatus s = st.get(name);
        n.put("kind", s == null ? null : s.kind());
        n.set("status", s == null ? null : Views.connectorStatus(s));
        list.add(n);
      }
      ObjectNode n = Views.obj();
      n.set("connectors", list);
      return Reply.ok(n);
    }
    String name = rest.get(0);
    if (rest.size() == 2) {
      need(m, "POST");
      write(readOnly);
      boolean known = switch (rest.get(1)) {
        case "pause" -> queen.connectors().setEnabled(name, false);
        case "resume" -> queen.connectors().setEnabled(name, true);
        case "resync" -> queen.connectors().resync(name);
        default -> throw new HttpError(404, "not_found", "connector actions: pause, resume, resync");
      };
      if (!known) {
        throw new HttpError(404, "connector_not_found", "no connector '" + clip(name) + "'");
      }
      return connectorView(name);
    }
    if (rest.size() != 1) {
      throw r.notFound();
    }
    switch (m) {
      case "GET" -> {
        return connectorView(name);
      }
      case "PUT" -> {
        write(readOnly);
        queen.connectors().put(name, r.json());
        return connectorView(name);
      }
      case "DELETE" -> {
        write(readOnly);
        if (!queen.connectors().delete(name)) {
          throw new HttpError(404, "connector_not_found", "no connector '" + clip(name) + "'");
        }
        return Reply.ok(Views.obj().put("name", name).put("deleted", true));
      }
      default -> throw new HttpError(405, "method_not_allowed", "this route answers GET, PUT, DELETE, not " + m);
    }
  }

  /** The stored document (never its password) with {@code name} and this node's {@code status}. */
  private Reply connectorView(String name) {
    JsonNode doc = queen.connectors().get(name).orElseThrow(() -> new HttpError(404, "connector_not_found",
        "no connector '" + clip(name) + "'"));
    ObjectNode n = Views.obj().put("name", name);
    doc.fields().forEachRemaining(e -> n.set(e.getKey(), e.getValue()));
    n.set("status", queen.connectors().status(name).map(Views::connectorStatus).orElse(null));
    return Reply.ok(n);
  }
}
