package io.queen.embedded.spi;

import java.util.List;

/**
 * The options of a connector module (queen-pgconn's {@code io.queen.pgconn.ConnectorOptions}). The application hands
 * them to {@code EmbeddedQueen.builder().connectors(...)}; the builder refuses them with its other options when
 * {@link #problems()} names any, and the module reads them back from {@link ConnectorHost#settings()}. A node built
 * without them runs the module with its defaults ({@link ConnectorProvider#settings}). Immutable.
 */
public interface ConnectorSettings {
  /** What is wrong with these settings, each naming the option, its bound and the value given; empty when valid. */
  List<String> problems();

  /** The effective settings as the node's start-up log line shows them. */
  String describe();
}
