package io.queen.testkit;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one PostgreSQL server of this JVM, started on first use and stopped by a shutdown hook.
 *
 * <p>Which server is used:
 * <ol>
 *   <li>{@code QUEEN_TEST_POSTGRES=url|embedded|testcontainers} forces a choice;</li>
 *   <li>otherwise, when {@code QUEEN_TEST_JDBC_URL} is set (with {@code QUEEN_TEST_JDBC_USER} and {@code QUEEN_TEST_JDBC_PASSWORD}),
 *       that server is used; the URL may name any database, the kit only connects to it to create and drop databases;</li>
 *   <li>otherwise an embedded PostgreSQL from the zonky binaries on the class path (17 unless the build names another version
 *       with {@code -Dzonky.binaries.version}, e.g. 18.1.0; see {@link EmbeddedBackend}) with {@code wal_level=logical}, {@code max_wal_senders=10},
 *       {@code max_replication_slots=10}, {@code max_connections=300}, {@code shared_buffers=128MB}, {@code fsync=on},
 *       {@code synchronous_commit=on} and {@code timezone=America/Sao_Paulo};</li>
 *   <li>and only if that fails to start and a Docker engine answers, a Testcontainers {@code postgres} of the same major version
 *       with the same settings.</li>
 * </ol>
 * Each variable may also be given as a system property of the same name; the environment wins.
 *
 * <p>Tests never share the server's databases: each asks for its own with {@link #createDatabase(String)}. Every database made
 * by the kit forces the session time zone {@value #SESSION_TIME_ZONE} on each new connection (a login event trigger, on PostgreSQL 17
 * and later; an older server keeps the client's zone), so code that silently assumes UTC fails in tests.
 */
public final class PostgresServer {

    /** The session time zone that every connection to a kit database gets; deliberately not UTC, with daylight-saving history. */
    public static final String SESSION_TIME_ZONE = "America/Sao_Paulo";

    /** Which server the kit is using. */
    public enum Kind {
        /** Zonky's embedded PostgreSQL, started by the kit. */
        EMBEDDED,
        /** A server given by {@code QUEEN_TEST_JDBC_URL}, not started or stopped by the kit. */
        EXTERNAL,
        /** A Testcontainers {@code postgres} of the embedded binaries' major version, started by the kit. */
        TESTCONTAINERS
    }

    private static final Logger LOG = LoggerFactory.getLogger(PostgresServer.class);
    private static final Pattern PREFIX = Pattern.compile("[a-z][a-z0-9_]*");
    private static final Pattern DATABASE_NAME = Pattern.compile("[a-z][a-z0-9_]{0,62}");
    private static final int MAX_IDENTIFIER = 63;
    private static final String RANDOM_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789";

    /** The lazily started server; the only static state of the kit. Class initialisation makes the start run once. */
    private static final class Holder {
        private static final Startup STARTUP = Startup.run();
    }

    /** The outcome of the one start attempt: a server, or why there is none. */
    private static final class Startup {
        private final PostgresServer server;
        private final RuntimeException failure;

        private Startup(PostgresServer server, RuntimeException failure) {
            this.server = server;
            this.failure = failure;
        }

        static Startup run() {
            try {
                return new Startup(PostgresServer.start(), null);
            } catch (RuntimeException | Error e) {
                return new Startup(null, e instanceof RuntimeException re ? re : new IllegalStateException(e));
            }
        }
    }

    private final ServerBackend backend;
    private final org.postgresql.Driver driver = new org.postgresql.Driver();
    private final AtomicInteger databaseCounter = new AtomicInteger();
    private final String version;
    private final int versionNum;
    private final long startupMillis;

    private PostgresServer(ServerBackend backend, long startupMillis) {
        this.backend = backend;
        this.startupMillis = startupMillis;
        try (Connection c = adminConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT current_setting('server_version'), current_setting('server_version_num')::int")) {
            rs.next();
            this.version = rs.getString(1).split(" ")[0];
            this.versionNum = rs.getInt(2);
        } catch (SQLException e) {
            throw new IllegalStateException("PostgreSQL started but does not answer at " + backend.jdbcUrl(backend.adminDatabase()), e);
        }
    }

    /**
     * The server of this JVM, started on the first call (which may take a few seconds) and reused afterwards.
     *
     * @throws IllegalStateException when no server could be started; every later call throws again without retrying
     */
    public static PostgresServer get() {
        Startup startup = Holder.STARTUP;
        if (startup.failure != null) {
            throw new IllegalStateException("No PostgreSQL for tests: " + startup.failure.getMessage(), startup.failure);
        }
        return startup.server;
    }

    private static PostgresServer start() {
        String mode = configured("QUEEN_TEST_POSTGRES");
        String url = configured("QUEEN_TEST_JDBC_URL");
        mode = mode == null ? "" : mode.trim().toLowerCase(Locale.ROOT);
        long started = System.nanoTime();
        ServerBackend backend;
        switch (mode) {
            case "url":
                if (url == null) {
                    throw new IllegalStateException("QUEEN_TEST_POSTGRES=url but QUEEN_TEST_JDBC_URL is not set");
                }
                backend = external(url);
                break;
            case "embedded":
                backend = EmbeddedBackend.start();
                break;
            case "testcontainers":
                if (!testcontainersOnClassPath()) {
                    throw new IllegalStateException("QUEEN_TEST_POSTGRES=testcontainers but org.testcontainers:postgresql is not on the class path");
                }
                backend = TestcontainersBackend.start();
                break;
            case "":
                backend = url != null ? external(url) : embeddedOrContainer();
                break;
            default:
                throw new IllegalStateException("QUEEN_TEST_POSTGRES must be embedded, url or testcontainers, got " + mode);
        }
        long millis = (System.nanoTime() - started) / 1_000_000;
        PostgresServer server;
        try {
            server = new PostgresServer(backend, millis);
            server.checkBinariesVersion();
        } catch (RuntimeException e) {
            backend.close();
            throw e;
        }
        Runtime.getRuntime().addShutdownHook(new Thread(backend::close, "testkit-postgres-shutdown"));
        LOG.info("Tests use {} (ready in {} ms)", server.describe(), millis);
        return server;
    }

    /** An embedded server must be the version the build asked for: tests that say they ran on 18 did. */
    private void checkBinariesVersion() {
        String binaries = EmbeddedBackend.binariesVersion();
        if (kind() == Kind.EMBEDDED && binaries != null && !EmbeddedBackend.runs(version, binaries)) {
            throw new IllegalStateException("The embedded server is PostgreSQL " + version + ", but " + EmbeddedBackend.BINARIES_VERSION
                    + " asks for " + binaries + ": the zonky binaries on the class path are not the ones the build named");
        }
    }

    private static ServerBackend external(String url) {
        return new ExternalBackend(url, configured("QUEEN_TEST_JDBC_USER"), configured("QUEEN_TEST_JDBC_PASSWORD"));
    }

    private static ServerBackend embeddedOrContainer() {
        try {
            return EmbeddedBackend.start();
        } catch (RuntimeException | Error embeddedFailure) {
            if (testcontainersOnClassPath() && TestcontainersBackend.dockerAvailable()) {
                LOG.warn("Embedded PostgreSQL failed to start; falling back to Testcontainers {}", TestcontainersBackend.image(),
                        embeddedFailure);
                try {
                    return TestcontainersBackend.start();
                } catch (RuntimeException containerFailure) {
                    containerFailure.addSuppressed(embeddedFailure);
                    throw containerFailure;
                }
            }
            throw embeddedFailure;
        }
    }

    private static boolean testcontainersOnClassPath() {
        try {
            Class.forName("org.testcontainers.DockerClientFactory", false, PostgresServer.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    private static String configured(String name) {
        String value = System.getenv(name);
        if (value == null || value.isBlank()) {
            value = System.getProperty(name);
        }
        return value == null || value.isBlank() ? null : value;
    }

    /**
     * Creates a fresh, empty database named {@code <prefix>_<counter>_<random>} and returns it; the caller closes it, which drops it.
     *
     * @param prefix lowercase letters, digits and underscores, starting with a letter; cut short if the name would exceed 63 characters
     * @throws IllegalArgumentException when the prefix has other characters
     */
    public TestDatabase createDatabase(String prefix) {
        String name = newDatabaseName(prefix);
        try (Connection c = adminConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + name);
            s.execute("ALTER DATABASE " + name + " SET TimeZone = '" + SESSION_TIME_ZONE + "'");
        } catch (SQLException e) {
            throw new IllegalStateException("Could not create database " + name + " on " + describe(), e);
        }
        TestDatabase database = new TestDatabase(this, name);
        try {
            installSessionDefaults(database);
        } catch (RuntimeException e) {
            database.close();
            throw e;
        }
        return database;
    }

    String newDatabaseName(String prefix) {
        if (prefix == null || !PREFIX.matcher(prefix).matches()) {
            throw new IllegalArgumentException("Database prefix must match [a-z][a-z0-9_]*, got " + prefix);
        }
        ThreadLocalRandom random = ThreadLocalRandom.current();
        StringBuilder suffix = new StringBuilder().append('_').append(databaseCounter.incrementAndGet()).append('_');
        for (int i = 0; i < 6; i++) {
            suffix.append(RANDOM_CHARS.charAt(random.nextInt(RANDOM_CHARS.length())));
        }
        String cut = prefix.substring(0, Math.min(prefix.length(), MAX_IDENTIFIER - suffix.length()));
        String name = cut + suffix;
        if (!DATABASE_NAME.matcher(name).matches()) {
            throw new IllegalStateException("Generated an invalid database name " + name);
        }
        return name;
    }

    /**
     * pgjdbc always sends the JVM's time zone as the {@code TimeZone} startup parameter, and that overrides both
     * {@code options=-c TimeZone=...} in the URL and {@code ALTER DATABASE ... SET TimeZone}. Only a {@code SET} after login wins,
     * so on PostgreSQL 17 the kit installs a login event trigger that sets the zone for every new session, whatever the client.
     */
    private void installSessionDefaults(TestDatabase database) {
        if (versionNum < 170000) {
            LOG.warn("PostgreSQL {} has no login event triggers; sessions of {} keep the client's time zone", version, database.name());
            return;
        }
        try (Connection c = database.connection(); Statement s = c.createStatement()) {
            s.execute("CREATE SCHEMA testkit");
            s.execute("CREATE FUNCTION testkit.session_defaults() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN "
                    + "PERFORM pg_catalog.set_config('TimeZone', '" + SESSION_TIME_ZONE + "', false); END $$");
            s.execute("CREATE EVENT TRIGGER testkit_session_defaults ON login EXECUTE FUNCTION testkit.session_defaults()");
        } catch (SQLException e) {
            LOG.warn("Could not install the login trigger in {} (needs a superuser); sessions keep the client's time zone",
                    database.name(), e);
        }
    }

    void dropDatabase(String name) {
        try (Connection c = adminConnection(); Statement s = c.createStatement()) {
            s.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
        } catch (SQLException e) {
            throw new IllegalStateException("Could not drop database " + name + " on " + describe(), e);
        }
    }

    Connection connect(String database) throws SQLException {
        Properties properties = new Properties();
        if (backend.user() != null) {
            properties.setProperty("user", backend.user());
        }
        if (backend.password() != null) {
            properties.setProperty("password", backend.password());
        }
        String url = backend.jdbcUrl(database);
        Connection connection = driver.connect(url, properties);
        if (connection == null) {
            throw new SQLException("pgjdbc does not accept " + url);
        }
        return connection;
    }

    /**
     * A new connection to the server's maintenance database, which the caller closes: for tests that act on
     * their own database as a whole (refusing its connections to simulate an outage, say).
     */
    public Connection adminConnection() throws SQLException {
        return connect(backend.adminDatabase());
    }

    ServerBackend backend() {
        return backend;
    }

    /** Which kind of server this is. */
    public Kind kind() {
        return backend.kind();
    }

    /** The server's {@code server_version_num}, e.g. 170006 for 17.6. */
    public int serverVersionNum() {
        return versionNum;
    }

    /** The value of a server setting as {@code SHOW} gives it (read from the database the kit administers from). */
    public String setting(String name) {
        try (Connection c = adminConnection(); PreparedStatement s = c.prepareStatement("SELECT current_setting(?)")) {
            s.setString(1, name);
            try (ResultSet rs = s.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        } catch (SQLException e) {
            throw new IllegalStateException("Could not read setting " + name + " from " + describe(), e);
        }
    }

    /** How long the server took to become ready when this JVM first asked for it, in milliseconds. */
    public long startupMillis() {
        return startupMillis;
    }

    /** A one-line description for logs, e.g. "embedded PostgreSQL 18.1 on port 12345". */
    public String describe() {
        String kind = switch (backend.kind()) {
            case EMBEDDED -> "embedded";
            case EXTERNAL -> "external";
            case TESTCONTAINERS -> "Testcontainers";
        };
        return kind + " PostgreSQL " + version + " " + backend.location();
    }

    @Override
    public String toString() {
        return describe();
    }
}
