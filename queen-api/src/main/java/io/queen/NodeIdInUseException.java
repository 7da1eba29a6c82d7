package io.queen;

import java.time.Duration;
import java.util.Objects;

/**
 * {@code start()} refused to start a node because another process holds its node id and is alive: the
 * id's row in {@code <schema>.nodes} kept its heartbeat fresh while this node waited. Node ids are a
 * static membership: one id names one running instance (for example {@code orders-worker-1}, from a
 * StatefulSet ordinal), and an instance that restarts with the id of a crashed predecessor takes the id
 * and its leases over as soon as the predecessor's heartbeat is older than its session timeout. Two
 * instances started with the same id at once would otherwise consume as one node.
 *
 * <p>Nothing was started and nothing in the database changed. Give each instance its own id, or stop the
 * other one first (a clean {@code close()} frees the id at once).
 */
public final class NodeIdInUseException extends QueenException {
  private static final long serialVersionUID = 1L;
  private final String nodeId;
  private final Duration heartbeatAge;

  /**
   * @param nodeId the id that is in use
   * @param heartbeatAge how old the holder's heartbeat was when this node gave up waiting
   * @param waited how long this node waited for the holder's heartbeat to go stale
   */
  public NodeIdInUseException(String nodeId, Duration heartbeatAge, Duration waited) {
    super("node id '" + Objects.requireNonNull(nodeId, "nodeId must not be null") + "' is in use by a live node (its heartbeat is "
        + Objects.requireNonNull(heartbeatAge, "heartbeatAge must not be null").toMillis() + " ms old; waited "
        + Objects.requireNonNull(waited, "waited must not be null").toMillis() + " ms for it to go stale): give each instance its own"
        + " nodeId, or close the other one first");
    this.nodeId = nodeId;
    this.heartbeatAge = heartbeatAge;
  }

  /** The node id another live node holds. */
  public String nodeId() {
    return nodeId;
  }

  /** How old the holder's heartbeat was when this node gave up waiting. */
  public Duration heartbeatAge() {
    return heartbeatAge;
  }
}
