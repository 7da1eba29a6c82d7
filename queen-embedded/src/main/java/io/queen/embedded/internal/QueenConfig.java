package io.queen.embedded.internal;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.concurrent.ThreadFactory;
import javax.sql.DataSource;

/** The validated, immutable configuration of one node. */
public record QueenConfig(DataSource dataSource, String jdbcUrl, String user, String password, int poolSize,
    String schema, String nodeId, ObjectMapper mapper, ThreadFactory threadFactory, Duration pollInterval,
    Duration closeGrace, boolean listen, boolean janitor, long kvMaxReadBytes, Object meterRegistry, int maxPayloadBytes,
    Duration connectTimeout, Duration sessionTimeout, Duration pushReceiptRetention, byte[] encryptionKey,
    int connectorThreads, Duration connectorRefresh, boolean runConnectors, Duration sourceLeaseTtl, io.queen.PayloadTypes payloadTypes,
    java.util.List<byte[]> oldEncryptionKeys, Duration horizonWarnAfter, Duration removeEmptyPartitionsAfter,
    java.util.List<String> meterTags, Duration groupIdleExpiry, boolean adoptEncryptionKey,
    io.queen.embedded.http.HttpOptions http) {

  /** The heartbeat interval, derived from the session timeout: a fifth of it, at most 2 s. */
  public Duration heartbeatInterval() {
    return heartbeatInterval(sessionTimeout);
  }

  /** A fifth of {@code sessionTimeout}, at most 2 s (so at least five beats fit in one session timeout). */
  public static Duration heartbeatInterval(Duration sessionTimeout) {
    Duration fifth = sessionTimeout.dividedBy(5);
    return fifth.compareTo(Duration.ofSeconds(2)) > 0 ? Duration.ofSeconds(2) : fifth;
  }

  /** The effective settings for the start-up log line, with the password masked. */
  public String describe() {
    return "schema=" + schema + ", node=" + nodeId + ", pool=" + (dataSource != null ? "application DataSource"
        : "own HikariCP(" + poolSize + ") " + maskUrl(jdbcUrl)) + ", pollInterval=" + pollInterval
        + ", closeGrace=" + closeGrace + ", listen=" + listen + ", janitor=" + janitor + ", kvMaxReadBytes=" + kvMaxReadBytes + ", metrics=" + (meterRegistry != null) + (meterTags.isEmpty() ? "" : " tagged " + meterTags)
        + ", maxPayloadBytes=" + maxPayloadBytes + ", connectTimeout=" + connectTimeout
        + ", sessionTimeout=" + sessionTimeout + " (heartbeat every " + heartbeatInterval() + ")"
        + ", pushReceiptRetention=" + pushReceiptRetention
        + ", removeEmptyPartitionsAfter=" + (removeEmptyPartitionsAfter.isZero() ? "never" : removeEmptyPartitionsAfter)
        + ", horizonWarnAfter=" + (horizonWarnAfter.isZero() ? "off" : horizonWarnAfter)
        + ", encryptionKey=" + (encryptionKey != null ? "set" + (adoptEncryptionKey ? " (adopt)" : "") : "none")
        + ", connectors=" + (runConnectors
        ? connectorThreads + " thread(s), re-read every " + connectorRefresh + ", source lease " + sourceLeaseTtl : "off")
        + ", http=" + (http == null ? "off" : http);
  }

  @Override
  public String toString() {
    return "QueenConfig[" + describe() + "]";
  }

  static String maskUrl(String url) {
    return url == null ? null : url.replaceAll("(?i)(password=)[^&]*", "$1****");
  }
}
