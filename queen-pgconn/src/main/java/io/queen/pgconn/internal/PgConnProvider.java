package io.queen.pgconn.internal;

import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConnectorPlugin;
import io.queen.embedded.spi.ConnectorProvider;
import io.queen.embedded.spi.ConnectorSettings;
import io.queen.pgconn.internal.spec.RuntimeOptions;
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

  /** The options given to the node's builder ({@code ConnectorOptions}), or {@link RuntimeOptions#DEFAULTS}. */
  @Override
  public ConnectorSettings settings(ConnectorSettings given) {
    if (given == null) {
      return RuntimeOptions.DEFAULTS;
    }
    if (!(given instanceof RuntimeOptions)) {
      throw new IllegalArgumentException("connectors(...) was given a " + given.getClass().getName()
          + "; queen-pgconn reads io.queen.pgconn.ConnectorOptions");
    }
    return given;
  }

  @Override
  public ConnectorPlugin start(ConnectorHost host) {
    return new Registry(host, (RuntimeOptions) host.settings());
  }
}
