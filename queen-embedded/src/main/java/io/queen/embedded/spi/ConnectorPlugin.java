package io.queen.embedded.spi;

import io.queen.Connectors;

/** A started connector runtime: the registry it serves, and its stop. */
public interface ConnectorPlugin extends AutoCloseable {
  /** What {@link io.queen.Queen#connectors()} returns on this node. */
  Connectors connectors();

  /**
   * Stops every connector worker of this node within {@link ConnectorHost#closeGrace()} and gives back what
   * it holds. Called by {@link io.queen.Queen#close()} before the node's own subscriptions stop. Idempotent.
   */
  @Override
  void close();
}
