package io.queen.embedded.internal.config;

import java.time.Duration;
import javax.sql.DataSource;

/**
 * Where the node's connections come from: the application's {@code dataSource}, or the pool Queen opens from
 * {@code jdbcUrl}, {@code user}, {@code password} and {@code poolSize}; the bound on every wait for one; and the schema
 * that holds Queen's tables. {@link #toString()} masks the password.
 */
public record ConnectionConfig(DataSource dataSource, String jdbcUrl, String user, String password, int poolSize,
    Duration connectTimeout, String schema) {

  /** The pool, as the start-up line names it: the application's, or Queen's own with its URL's password masked. */
  public String describePool() {
    return dataSource != null ? "application DataSource" : "own HikariCP(" + poolSize + ") " + maskUrl(jdbcUrl);
  }

  @Override
  public String toString() {
    return "ConnectionConfig[schema=" + schema + ", pool=" + describePool() + ", user=" + user + ", password="
        + (password == null ? "none" : "****") + ", connectTimeout=" + connectTimeout + "]";
  }

  static String maskUrl(String url) {
    return url == null ? null : url.replaceAll("(?i)(password=)[^&]*", "$1****");
  }
}
