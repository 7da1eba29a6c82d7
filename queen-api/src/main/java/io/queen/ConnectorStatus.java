package io.queen;

import java.time.Instant;
import java.util.Map;

/**
 * One connector as this node sees it.
 *
 * @param name the connector's name
 * @param kind {@code sink} or {@code source}
 * @param phase {@code running}, {@code error} or {@code disabled} for a sink (the source's phases come with the source)
 * @param errorCode the last error's code (a closed set, see the queen-pgconn README), or null
 * @param error a sentence that names the fix, or null; never a payload, statement text or password
 * @param counters {@code applied}, {@code skipped}, {@code dlq}, {@code batches}, {@code errors} since this node started it
 * @param lastProgress when this node last committed a batch for it, or null
 */
public record ConnectorStatus(String name, String kind, String phase, String errorCode, String error,
    Map<String, Long> counters, Instant lastProgress) {
  public ConnectorStatus {
    counters = Map.copyOf(counters);
  }
}
