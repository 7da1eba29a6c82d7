package io.queen.pgconn.internal;

import io.queen.embedded.spi.ConnectorHost;
import io.queen.embedded.spi.ConnectorPlugin;
import io.queen.embedded.spi.ConnectorProvider;

/** Found by queen-embedded through {@link java.util.ServiceLoader}: starts this node's connector registry. */
public final class PgConnProvider implements ConnectorProvider {
  @Override
  public ConnectorPlugin start(ConnectorHost host) {
    return new Registry(host, host.runConnectors());
  }
}
