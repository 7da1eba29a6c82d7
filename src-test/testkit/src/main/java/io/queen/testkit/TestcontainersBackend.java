package io.queen.testkit;

import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.PostgreSQLContainer;
import org.testcontainers.utility.DockerImageName;

/**
 * A {@code postgres} container of the embedded binaries' major version ({@code postgres:17} by default, {@code postgres:18}
 * with {@code -Dzonky.binaries.version=18.1.0}). This is the only class of the kit that names a Testcontainers type, so when Docker or the
 * Testcontainers jar is missing nothing is loaded unless this path is asked for ({@code QUEEN_TEST_POSTGRES=testcontainers}) or
 * the embedded server failed to start.
 */
final class TestcontainersBackend implements ServerBackend {

    private static final Logger LOG = LoggerFactory.getLogger(TestcontainersBackend.class);

    private final PostgreSQLContainer<?> container;

    private TestcontainersBackend(PostgreSQLContainer<?> container) {
        this.container = container;
    }

    /** Whether Testcontainers finds a Docker engine that answers; false on any error. */
    static boolean dockerAvailable() {
        try {
            return DockerClientFactory.instance().isDockerAvailable();
        } catch (RuntimeException | LinkageError e) {
            LOG.debug("No Docker engine for Testcontainers", e);
            return false;
        }
    }

    /** The image the kit starts: {@code postgres:<major>}, the major version of the embedded binaries. */
    static String image() {
        return "postgres:" + EmbeddedBackend.binariesMajor();
    }

    static ServerBackend start() {
        PostgreSQLContainer<?> container = new PostgreSQLContainer<>(DockerImageName.parse(image()));
        container.withCommand("postgres",
                        "-c", "wal_level=logical",
                        "-c", "max_wal_senders=10",
                        "-c", "max_replication_slots=10",
                        "-c", "max_connections=300",
                        "-c", "shared_buffers=128MB",
                        "-c", "fsync=on",
                        "-c", "synchronous_commit=on",
                        "-c", "timezone=" + PostgresServer.SESSION_TIME_ZONE)
                .withStartupTimeout(Duration.ofSeconds(60));
        container.start();
        return new TestcontainersBackend(container);
    }

    @Override
    public PostgresServer.Kind kind() {
        return PostgresServer.Kind.TESTCONTAINERS;
    }

    @Override
    public String host() {
        return container.getHost();
    }

    @Override
    public int port() {
        return container.getMappedPort(PostgreSQLContainer.POSTGRESQL_PORT);
    }

    @Override
    public String user() {
        return container.getUsername();
    }

    @Override
    public String password() {
        return container.getPassword();
    }

    @Override
    public String adminDatabase() {
        return container.getDatabaseName();
    }

    @Override
    public String jdbcUrl(String database) {
        return "jdbc:postgresql://" + host() + ":" + port() + "/" + database;
    }

    @Override
    public String location() {
        return "in container " + container.getContainerId().substring(0, 12) + " on " + host() + ":" + port();
    }

    @Override
    public void close() {
        try {
            container.stop();
        } catch (RuntimeException e) {
            LOG.warn("Could not stop the PostgreSQL container", e);
        }
    }
}
