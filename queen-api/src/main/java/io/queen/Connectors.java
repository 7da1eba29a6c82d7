package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Optional;

/**
 * The connector registry: documents that describe Postgres sinks and sources, stored in Queen's
 * schema and run by every node that has {@code io.queen:queen-pgconn} on its classpath. Obtain it from
 * {@link Queen#connectors()}.
 *
 * <p>A document is a JSON connector document as the queen-pgconn README describes it, e.g.
 * <pre>{@code
 * queen.connectors().put("invoices-sink", """
 *     {"kind": "sink",
 *      "sink": {"queue": "invoices", "table": "public.invoices", "mode": "upsert"}}""");
 * }</pre>
 * It is validated completely before anything is stored: a bad one is an {@link InvalidConnectorException}
 * naming the field path, what was given and what is allowed, and nothing changes. Every node re-reads the
 * documents every few seconds (queen-pgconn's {@code ConnectorOptions.refresh}, 5 s by default) and starts, stops
 * and reconfigures its workers to match, so a {@code put} on one node takes effect on all of them.
 *
 * <p>A document's {@code connection.password} is stored sealed (AES-256-GCM under the node's encryption
 * key); {@link #get} and {@link #list} never return it: a document put again must carry it again, or use
 * {@link #setEnabled} to pause and resume. Thread-safe.
 */
public interface Connectors {
  /**
   * Creates or replaces the connector {@code name} with {@code document} (the whole document).
   *
   * @throws InvalidConnectorException the name or the document is invalid (nothing stored)
   * @throws ConnectorException the document carries a password and this node has no encryption key
   */
  void put(String name, JsonNode document);

  /** As {@link #put(String, JsonNode)}, from JSON text. */
  void put(String name, String documentJson);

  /** The stored document, without its password; empty when there is no such connector. */
  Optional<JsonNode> get(String name);

  /** The names of every stored connector, in name order. */
  List<String> list();

  /**
   * Turns the connector on or off (its document's {@code enabled}) and keeps everything else, the sealed password
   * included: the way to pause and resume one. A {@link #put} replaces the whole document, and since {@link #get}
   * never returns the password, a document read, changed and put again has none. Takes effect on every node within
   * the re-read period; a disabled source keeps its slot and pointer and goes on from there when enabled again, a
   * disabled sink keeps its consumer group's position.
   *
   * @return false when there is no such connector
   */
  boolean setEnabled(String name, boolean enabled);

  /** Deletes the connector; its workers stop on every node within the re-read period. False when absent. */
  boolean delete(String name);

  /**
   * Starts a source over (a resync): a new epoch, so message ids never repeat the old ones; its slot
   * dropped and created again; and, unless its document says {@code snapshot: "never"}, a new snapshot that
   * writes every row that still exists as an {@code r} event. The way out of {@code slot_lost},
   * {@code slot_invalidated} and {@code slot_ahead}. Rows deleted while the slot was gone have no event.
   *
   * @return false when there is no such connector
   * @throws InvalidConnectorException the connector is a sink
   */
  boolean resync(String name);

  /** This node's view of the connector; empty when there is no such connector. */
  Optional<ConnectorStatus> status(String name);

  /** This node's view of every connector it knows, in name order. */
  List<ConnectorStatus> status();
}
