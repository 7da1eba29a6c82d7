package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.ConnectorStatus;
import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Instant;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What any node does to a source it need not run, for the registry: its status as stored (lease and pointer), the
 * tables a put adds to its publication, the drop of its slot and publication at a delete, and a resync request.
 */
public final class SourceAdmin {
  /** Logs under Source's logger, the one an operator knows and configures for all of it. */
  private static final Logger LOG = LoggerFactory.getLogger(Source.class);

  private SourceAdmin() {}

  /** A source's lease and pointer as stored in Queen's KV; all null when none, or Queen's database is out of reach. */
  record Stored(String leaseNode, Instant expires, JsonNode pointer) {
    /** The pointer's LSN, or null. */
    String lsn() {
      return pointer == null ? null : pointer.path("lsn").asText(null);
    }
  }

  /** Reads a source's lease and pointer (nothing when Queen's database does not answer). */
  static Stored stored(ConnectorHost host, String name) {
    String leaseNode = null;
    Instant expires = null;
    JsonNode pointer = null;
    try {
      KvEntry l = Lease.read(host.kv(), name);
      if (l.found()) {
        leaseNode = l.value().path("node").asText(null);
        expires = l.expiresAt();
      }
      KvEntry p = host.queen().kv().get(Lease.NAMESPACE, Lease.pointerKey(name));
      pointer = p.found() ? p.value() : null;
    } catch (RuntimeException e) {
      // Queen's database unavailable: nothing more to tell
    }
    return new Stored(leaseNode, expires, pointer);
  }

  /**
   * The status of a source this node does not run (a node built with {@code run(false)}, or one that has
   * not read the document yet): the lease's node and expiry and the pointer, read from KV like on every node;
   * phase {@code standby} while some node holds the lease, else {@code disabled}; no counters (they are per node).
   */
  public static ConnectorStatus observed(ConnectorHost host, String name, boolean enabled) {
    Stored stored = stored(host, name);
    // held by another node: standby; stored and enabled but owned by no node at this moment (not read yet, or
    // between owners): starting, whether or not this node runs connectors (a node that does not still reports it)
    String phase = !enabled ? "disabled" : stored.leaseNode() != null ? "standby" : "starting";
    return new ConnectorStatus(name, "source", phase, null, null, Map.of(), null, stored.lsn(), stored.leaseNode(),
        stored.expires(), stored.pointer());
  }

  /**
   * At a put of this source's document: adds its tables that the existing publication lacks, so a table added to a
   * running source is streamed from the put on, not from when its owner runs the new document. Null when done (or
   * nothing to do), else why not.
   */
  public static String publishAddedTables(SourceSpec spec, String password, javax.sql.DataSource queens) {
    return SourceSetup.publishAddedTables(spec, password, queens);
  }

  /** Drops the slot (and the publication when managed) of a deleted source; best effort, logged. */
  public static void dropObjects(ConnectorHost host, SourceSpec spec, String password) {
    Codec codec = new DecoderCodec();
    try (Connection c = SourceConnections.of(spec, password, host.dataSource()).normal(codec)) {
      for (int i = 0; i < 50 && !SourceSetup.dropSlot(c, spec.slot()); i++) {
        Thread.sleep(200); // its owner is stopping
      }
      if (spec.managePublication()) {
        if (SourceSetup.createdBy(c, spec.publication(), spec.name())) {
          SourceSetup.dropPublication(c, spec.publication());
        } else if (SourceSetup.publicationExists(c, spec.publication())) {
          LOG.info("{} - source '{}': kept publication {}, which the source did not create", host.nodeId(),
              spec.name(), spec.publication());
        }
      }
      host.queen().kv().delete(Lease.NAMESPACE, Lease.pointerKey(spec.name()));
    } catch (SQLException | SourceConnections.Unavailable | RuntimeException e) {
      LOG.warn("{} - source '{}': could not reach its database to drop its slot {}, if the source ever created it ({});"
          + " look in pg_replication_slots there and drop it by hand: a slot pins WAL", host.nodeId(), spec.name(),
          spec.slot(), e instanceof SQLException || e instanceof RuntimeException ? host.describe(e) : e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Asks for a resync: the pointer is replaced by one marked {@code resync} (so the owner's next pointer write
   * fails and it stops); the owner then drops the slot, creates it again and starts a new epoch.
   */
  public static void requestResync(ConnectorHost host, String name) {
    host.queen().kv().put(Lease.NAMESPACE, Lease.pointerKey(name), host.mapper().createObjectNode().put("resync", true),
        Kv.forever());
  }
}
