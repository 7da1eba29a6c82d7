package io.queen.pgconn.internal;

import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConnectorPlugin;
import io.queen.embedded.spi.ConnectorProvider;
import io.queen.embedded.spi.SchemaModule;
import java.util.List;

/**
 * Found by queen-embedded through {@link java.util.ServiceLoader}: brings this module's part of Queen's schema (the
 * connector registry's table) and starts this node's connector registry.
 */
public final class PgConnProvider implements ConnectorProvider {
  /**
   * Migrations and function files under {@code io/queen/pgconn/sql}, migrated into Queen's schema with the core's.
   * The per-target objects a sink creates in the target database (progress and dead-letter tables) are not here.
   */
  static final SchemaModule SCHEMA = new SchemaModule("pgconn", PgConnProvider.class, "/io/queen/pgconn/sql",
      List.of("V1__connectors.sql"), List.of("connectors_next_version.sql"));

  @Override
  public List<SchemaModule> schema() {
    return List.of(SCHEMA);
  }

  @Override
  public ConnectorPlugin start(ConnectorHost host) {
    return new Registry(host, host.runConnectors());
  }
}
