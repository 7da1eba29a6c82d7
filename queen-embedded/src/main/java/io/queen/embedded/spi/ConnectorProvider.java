package io.queen.embedded.spi;

/**
 * Found with {@link java.util.ServiceLoader} when a node starts (list the implementation in
 * {@code META-INF/services/io.queen.embedded.spi.ConnectorProvider}). The first provider found is used.
 */
public interface ConnectorProvider {
  /**
   * The module's own tables and functions in Queen's schema: migrated with the core's, by the same migrator and
   * under the same lock, before the node starts (so before {@link #start}). Empty by default.
   */
  default java.util.List<SchemaModule> schema() {
    return java.util.List.of();
  }

  /**
   * The settings a node runs the module with: {@code given} (the builder's {@code connectors(...)}, null when none was
   * called) or the module's defaults. Called before the node opens a connection; throws
   * {@link IllegalArgumentException} for settings the module does not read (another module's), and the node does not
   * start.
   */
  ConnectorSettings settings(ConnectorSettings given);

  /**
   * Starts the connector runtime of one node. Called once, after the node is fully started; must return
   * quickly (start threads with {@link ConnectorHost#newThread}, never block on the database here).
   */
  ConnectorPlugin start(ConnectorHost host);
}
