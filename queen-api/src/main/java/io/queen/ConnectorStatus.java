package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.Map;

/**
 * One connector as this node sees it. The source's ownership fields ({@code leaseNode}, {@code leaseExpiresAt},
 * {@code pointer}, {@code pointerLsn}) are read from Queen's KV, so every node shows the same owner and pointer.
 *
 * @param name the connector's name
 * @param kind {@code sink} or {@code source}
 * @param phase a sink: {@code starting} (stored and enabled, not started by this node yet), {@code running},
 *     {@code error} or {@code disabled}; a source: {@code starting} (stored and enabled, owned by no node at this
 *     moment: not read yet, or between owners), {@code streaming}, {@code snapshot}, {@code connecting}, {@code standby}
 *     (another node owns it), {@code waiting_for_slot} (another process holds the slot), {@code error} or
 *     {@code disabled}
 * @param errorCode the last error's code (a closed set, see the queen-pgconn README), or null; a running sink whose
 *     queue does not exist yet reads {@code queue_missing} (not a failure: nothing is counted)
 * @param error a sentence that names the fix, or null; never a payload, statement text or password
 * @param counters a sink: {@code applied}, {@code skipped}, {@code dlq}, {@code batches}, {@code errors}; a
 *     source: {@code messages}, {@code transactions}, {@code bundles}, {@code snapshotRows}, {@code truncatesSkipped},
 *     {@code errors}; since this node started it
 * @param lastProgress when this node last committed a batch (or a source transaction) for it, or null
 * @param pointerLsn a source: the LSN its pointer covers ({@code 0/1526990}), or null
 * @param leaseNode a source: the node that owns it now, or null when nobody does
 * @param leaseExpiresAt a source: when that node's lease runs out unless renewed, or null
 * @param pointer a source: the whole pointer entry (lsn, how far into a split transaction, epoch, snapshot
 *     progress), or null
 */
public record ConnectorStatus(String name, String kind, String phase, String errorCode, String error,
    Map<String, Long> counters, Instant lastProgress, String pointerLsn, String leaseNode, Instant leaseExpiresAt,
    JsonNode pointer) {
  public ConnectorStatus {
    counters = Map.copyOf(counters);
  }

  /** A status without the source's ownership fields (a sink, or a source this node knows nothing more of). */
  public ConnectorStatus(String name, String kind, String phase, String errorCode, String error,
      Map<String, Long> counters, Instant lastProgress) {
    this(name, kind, phase, errorCode, error, counters, lastProgress, null, null, null, null);
  }

  /** A source's {@code messages} counter on this node (0 when absent). */
  public long messages() {
    return counters.getOrDefault("messages", 0L);
  }
}
