package io.queen.embedded.internal.config;

import java.util.List;

/**
 * The application's Micrometer {@code MeterRegistry} (typed {@code Object} so that Micrometer stays an optional
 * dependency; null: no metrics) and the common tags of the node's meters, as key/value pairs.
 */
public record MetricsConfig(Object registry, List<String> tags) {
  public MetricsConfig {
    tags = List.copyOf(tags);
  }
}
