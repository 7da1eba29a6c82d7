package io.queen.testkit;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A PostgreSQL 17 started from the zonky binaries on the class path.
 *
 * <p>Zonky unpacks the binaries once under {@code java.io.tmpdir/embedded-pg} and reuses them; each start runs initdb into a fresh
 * data directory that is deleted on close. When the JVM runs as root, zonky 2.x itself runs initdb and the postmaster inside
 * {@code unshare -U} (a user namespace where they are not uid 0), since PostgreSQL refuses to run as root.
 */
final class EmbeddedBackend implements ServerBackend {

    private static final Logger LOG = LoggerFactory.getLogger(EmbeddedBackend.class);

    private final EmbeddedPostgres postgres;

    private EmbeddedBackend(EmbeddedPostgres postgres) {
        this.postgres = postgres;
    }

    static EmbeddedBackend start() {
        long started = System.nanoTime();
        try {
            EmbeddedPostgres postgres = EmbeddedPostgres.builder()
                    .setServerConfig("wal_level", "logical")
                    .setServerConfig("max_wal_senders", "10")
                    .setServerConfig("max_replication_slots", "10")
                    .setServerConfig("max_connections", "300")
                    .setServerConfig("shared_buffers", "128MB")
                    // zonky's builder defaults to synchronous_commit=off and timezone=UTC; undo both on purpose:
                    // durable commits keep benchmarks honest, and a non-UTC server zone makes time-zone bugs show up.
                    .setServerConfig("fsync", "on")
                    .setServerConfig("synchronous_commit", "on")
                    .setServerConfig("timezone", PostgresServer.SESSION_TIME_ZONE)
                    .setPGStartupWait(Duration.ofSeconds(60))
                    .setRegisterShutdownHook(false)
                    .start();
            LOG.info("Embedded PostgreSQL started on port {} in {} ms", postgres.getPort(), (System.nanoTime() - started) / 1_000_000);
            return new EmbeddedBackend(postgres);
        } catch (IOException e) {
            throw new UncheckedIOException("Could not start the embedded PostgreSQL (zonky); set QUEEN_TEST_JDBC_URL to use another server", e);
        }
    }

    @Override
    public PostgresServer.Kind kind() {
        return PostgresServer.Kind.EMBEDDED;
    }

    @Override
    public String host() {
        return "localhost";
    }

    @Override
    public int port() {
        return postgres.getPort();
    }

    @Override
    public String user() {
        return "postgres";
    }

    @Override
    public String password() {
        return "postgres"; // trust authentication: any password is accepted
    }

    @Override
    public String adminDatabase() {
        return "postgres";
    }

    @Override
    public String jdbcUrl(String database) {
        return "jdbc:postgresql://localhost:" + postgres.getPort() + "/" + database;
    }

    @Override
    public String location() {
        return "on port " + postgres.getPort();
    }

    @Override
    public void close() {
        try {
            postgres.close();
        } catch (IOException | RuntimeException e) {
            LOG.warn("Could not stop the embedded PostgreSQL", e);
        }
    }
}
