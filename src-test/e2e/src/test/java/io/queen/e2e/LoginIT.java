package io.queen.e2e;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.queen.DatabaseLoginException;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.ByteArrayOutputStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A wrong password (SQLState 28P01) against a server that checks passwords: the shared test server trusts
 * every local login, so this test runs a PostgreSQL of its own whose pg_hba.conf asks for scram-sha-256.
 * Both ways of starting Queen report one {@link DatabaseLoginException} naming the user, never the password.
 */
class LoginIT {
  private static final String SECRET = "wrong-S3cret-value";

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void aWrongPasswordIsALoginErrorThatNamesTheUserAndNotThePassword() throws Exception {
    Path hba = Files.createTempFile("queen-hba-", ".conf");
    Files.writeString(hba, String.join("\n",
        "local all all trust",
        "host all postgres 127.0.0.1/32 trust",
        "host all postgres ::1/128 trust",
        "host all all 127.0.0.1/32 scram-sha-256",
        "host all all ::1/128 scram-sha-256", ""));
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("hba_file", hba.toString())
        .setServerConfig("password_encryption", "scram-sha-256").setPGStartupWait(Duration.ofSeconds(60))
        .setRegisterShutdownHook(false).start()) {
      try (Connection c = pg.getPostgresDatabase().getConnection(); Statement st = c.createStatement()) {
        st.execute("create role app login password 'right-password'");
        st.execute("grant create on database postgres to app"); // Queen creates its schema
      }
      String url = "jdbc:postgresql://localhost:" + pg.getPort() + "/postgres";

      // the pool Queen opens
      assertThatThrownBy(() -> EmbeddedQueen.builder().jdbcUrl(url, "app", SECRET).connectTimeout(Duration.ofSeconds(2))
          .start())
          .isInstanceOfSatisfying(DatabaseLoginException.class, e -> assertNoSecret(e, "28P01"));

      // the application's pool
      HikariConfig hc = new HikariConfig();
      hc.setJdbcUrl(url);
      hc.setUsername("app");
      hc.setPassword(SECRET);
      hc.setInitializationFailTimeout(-1); // the pool starts; the first connection Queen asks for is refused
      hc.setConnectionTimeout(2000);
      try (HikariDataSource ds = new HikariDataSource(hc)) {
        assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).start())
            .isInstanceOfSatisfying(DatabaseLoginException.class, e -> assertNoSecret(e, "28P01"));
      }

      // and the right password works
      try (Queen q = EmbeddedQueen.builder().jdbcUrl(url, "app", "right-password").start()) {
        q.queue("login").push(Map.of("ok", true));
        assertThat(q.queue("login").consumer().pop()).hasSize(1);
      }
    } finally {
      Files.deleteIfExists(hba);
    }
  }

  private static void assertNoSecret(DatabaseLoginException e, String sqlState) {
    assertThat(e.getMessage()).as("cause: %s", e.getCause()).contains("user 'app'").contains(sqlState).doesNotContain(SECRET);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (PrintWriter w = new PrintWriter(out)) {
      e.printStackTrace(w);
    }
    assertThat(out.toString()).as("the whole stack trace, causes included").doesNotContain(SECRET);
  }
}
