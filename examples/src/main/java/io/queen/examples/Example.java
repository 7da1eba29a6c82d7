package io.queen.examples;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.testkit.PostgresServer;
import io.queen.testkit.TestDatabase;
import javax.sql.DataSource;

/**
 * The database an example runs against: the server named by {@code QUEEN_JDBC_URL} (with
 * {@code QUEEN_JDBC_USER} / {@code QUEEN_JDBC_PASSWORD}) when set, otherwise a fresh database on an
 * embedded PostgreSQL 17 started for the example.
 */
public final class Example implements AutoCloseable {
  private final HikariDataSource pool;
  private final TestDatabase embedded;
  private final String description;

  private Example(HikariDataSource pool, TestDatabase embedded, String description) {
    this.pool = pool;
    this.embedded = embedded;
    this.description = description;
  }

  /** Opens the example's database. */
  public static Example database(String name) {
    String url = System.getenv("QUEEN_JDBC_URL");
    if (url != null && !url.isBlank()) {
      HikariConfig hc = new HikariConfig();
      hc.setJdbcUrl(url);
      hc.setUsername(System.getenv("QUEEN_JDBC_USER"));
      hc.setPassword(System.getenv("QUEEN_JDBC_PASSWORD"));
      hc.setMaximumPoolSize(16);
      hc.setPoolName(name);
      return new Example(new HikariDataSource(hc), null, "PostgreSQL at " + url.replaceAll("(?i)password=[^&]*", "password=****"));
    }
    PostgresServer server = PostgresServer.get();
    TestDatabase db = server.createDatabase(name);
    return new Example(db.newDataSource(16), db, server.describe() + ", database " + db.name());
  }

  public DataSource dataSource() {
    return pool;
  }

  public String description() {
    return description;
  }

  @Override
  public void close() {
    pool.close();
    if (embedded != null) {
      embedded.close();
    }
  }
}
