package io.queen.pgconn.internal.spec;

import io.queen.embedded.spi.ConnectorSettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The options a node's connector registry, its sinks and its sources run with: the public
 * {@code io.queen.pgconn.ConnectorOptions} implements this, so that the implementation reads them without depending on
 * the API package (the dependency points one way), and {@link #DEFAULTS} are what a node given none runs with. Their
 * check and their description for the node's start-up line are here, once. Immutable.
 */
public interface RuntimeOptions extends ConnectorSettings {
  /** Default {@link #threads()}. */
  int DEFAULT_THREADS = 2;
  /** Default {@link #refresh()}. */
  Duration DEFAULT_REFRESH = Duration.ofSeconds(5);
  /** Default {@link #sourceLeaseTtl()}. */
  Duration DEFAULT_SOURCE_LEASE_TTL = Duration.ofSeconds(10);
  /** What a node built without {@code connectors(...)} runs with. */
  RuntimeOptions DEFAULTS = new Values(DEFAULT_THREADS, DEFAULT_REFRESH, true, DEFAULT_SOURCE_LEASE_TTL);

  /** Threads of the registry, 1..64. */
  int threads();

  /**
   * How often the registry re-reads the documents, 100 ms .. 10 min; also how often a failed source tries again, and
   * how old a sink's reading of its table's shape may get.
   */
  Duration refresh();

  /** Whether this node runs connectors (it serves the registry either way). */
  boolean run();

  /** The TTL of a source's ownership lease, 1 s .. 10 min. */
  Duration sourceLeaseTtl();

  @Override
  default List<String> problems() {
    List<String> errors = new ArrayList<>();
    if (threads() < 1 || threads() > 64) {
      errors.add("ConnectorOptions.threads must be 1..64, was " + threads());
    }
    between(errors, "refresh", refresh(), Duration.ofMillis(100), Duration.ofMinutes(10));
    between(errors, "sourceLeaseTtl", sourceLeaseTtl(), Duration.ofSeconds(1), Duration.ofMinutes(10));
    return errors;
  }

  @Override
  default String describe() {
    return run() ? threads() + " thread(s), re-read every " + refresh() + ", source lease " + sourceLeaseTtl() : "off";
  }

  private static void between(List<String> errors, String field, Duration d, Duration min, Duration max) {
    if (d.compareTo(min) < 0 || d.compareTo(max) > 0) {
      errors.add("ConnectorOptions." + field + " must be between " + human(min) + " and " + human(max) + ", was "
          + human(d));
    }
  }

  /** 100 ms, 1 s, 10 min: as the documentation writes durations. */
  private static String human(Duration d) {
    long ms = d.toMillis();
    if (ms % 60_000 == 0 && ms > 60_000) {
      return ms / 60_000 + " min";
    }
    return ms % 1000 == 0 ? ms / 1000 + " s" : ms + " ms";
  }

  /** The defaults' holder. */
  record Values(int threads, Duration refresh, boolean run, Duration sourceLeaseTtl) implements RuntimeOptions {}
}
