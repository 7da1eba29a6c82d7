package io.queen.testkit;

import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A server the caller already runs, given by {@code QUEEN_TEST_JDBC_URL} (plus {@code QUEEN_TEST_JDBC_USER} and
 * {@code QUEEN_TEST_JDBC_PASSWORD}). The URL may name any database; the kit only connects to it to create and drop test databases.
 * The kit never stops this server.
 */
final class ExternalBackend implements ServerBackend {

    /** {@code jdbc:postgresql://hosts[/database][?parameters]}; the database part is replaced for each test database. */
    private static final Pattern URL = Pattern.compile("^(jdbc:postgresql://[^/?#]*)(?:/([^?#]*))?(\\?.*)?$");

    private final String hostsPart;
    private final String adminDatabase;
    private final String parameters;
    private final String host;
    private final int port;
    private final String user;
    private final String password;

    ExternalBackend(String url, String user, String password) {
        Matcher m = URL.matcher(url);
        if (!m.matches()) {
            throw new IllegalArgumentException("QUEEN_TEST_JDBC_URL must look like jdbc:postgresql://host:port/database, got " + url);
        }
        Properties parsed = org.postgresql.Driver.parseURL(url, null);
        if (parsed == null) {
            throw new IllegalArgumentException("pgjdbc does not accept QUEEN_TEST_JDBC_URL " + url);
        }
        this.hostsPart = m.group(1);
        this.adminDatabase = m.group(2) == null || m.group(2).isEmpty() ? "postgres" : m.group(2);
        this.parameters = m.group(3) == null ? "" : m.group(3);
        this.host = parsed.getProperty("PGHOST", "localhost").split(",")[0];
        this.port = Integer.parseInt(parsed.getProperty("PGPORT", "5432").split(",")[0]);
        this.user = user != null ? user : parsed.getProperty("user");
        this.password = password != null ? password : parsed.getProperty("password");
    }

    @Override
    public PostgresServer.Kind kind() {
        return PostgresServer.Kind.EXTERNAL;
    }

    @Override
    public String host() {
        return host;
    }

    @Override
    public int port() {
        return port;
    }

    @Override
    public String user() {
        return user;
    }

    @Override
    public String password() {
        return password;
    }

    @Override
    public String adminDatabase() {
        return adminDatabase;
    }

    @Override
    public String jdbcUrl(String database) {
        return hostsPart + "/" + database + parameters;
    }

    @Override
    public String location() {
        return "at " + hostsPart.substring("jdbc:postgresql://".length());
    }

    @Override
    public void close() {
        // not ours to stop
    }
}
