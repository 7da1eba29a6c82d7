package io.queen.embedded.spi;

/**
 * Found with {@link java.util.ServiceLoader} when a node starts (list the implementation in
 * {@code META-INF/services/io.queen.embedded.spi.ConnectorProvider}). The first provider found is used.
 */
public interface ConnectorProvider {
  /**
   * Starts the connector runtime of one node. Called once, after the node is fully started; must return
   * quickly (start threads with {@link ConnectorHost#newThread}, never block on the database here).
   */
  ConnectorPlugin start(ConnectorHost host);
}
