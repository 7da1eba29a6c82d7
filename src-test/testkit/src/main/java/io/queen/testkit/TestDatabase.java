package io.queen.testkit;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;

/**
 * A fresh database on the {@link PostgresServer}, made by {@link PostgresServer#createDatabase(String)} or by
 * {@link PostgresExtension}, and dropped ({@code WITH (FORCE)}) by {@link #close()}.
 *
 * <p>Every session opened on it gets the time zone {@value PostgresServer#SESSION_TIME_ZONE} (on PostgreSQL 17 and later), whatever
 * the JVM's zone, so that code assuming UTC shows its bugs. Thread-safe.
 */
public final class TestDatabase implements AutoCloseable {

    private static final int DEFAULT_POOL_SIZE = 20;

    private final PostgresServer server;
    private final String name;
    private final List<HikariDataSource> pools = new ArrayList<>(); // guarded by this
    private HikariDataSource dataSource; // guarded by this
    private int poolCounter; // guarded by this
    private boolean closed; // guarded by this

    TestDatabase(PostgresServer server, String name) {
        this.server = server;
        this.name = name;
    }

    /** The database name, e.g. {@code orderstest_3_k2x9qa}: lowercase letters, digits and underscores, at most 63 characters. */
    public String name() {
        return name;
    }

    /** A pgjdbc URL for this database, without user or password. */
    public String jdbcUrl() {
        return server.backend().jdbcUrl(name);
    }

    /** The user to log in as (a superuser on the embedded server). */
    public String user() {
        return server.backend().user();
    }

    /** The password of {@link #user()}. */
    public String password() {
        return server.backend().password();
    }

    /** The server's host name. */
    public String host() {
        return server.backend().host();
    }

    /** The server's port. */
    public int port() {
        return server.backend().port();
    }

    /** The server this database lives on. */
    public PostgresServer server() {
        return server;
    }

    /**
     * The database's shared pool, created on first use: HikariCP, at most 20 connections, pool name = {@link #name()}.
     * Closed by {@link #close()}; callers must not close it themselves.
     */
    public synchronized DataSource dataSource() {
        ensureOpen();
        if (dataSource == null) {
            dataSource = pool(name, DEFAULT_POOL_SIZE);
        }
        return dataSource;
    }

    /**
     * Another, independent HikariCP pool on this database, which the caller closes. {@link #close()} closes it too if it is still open.
     *
     * @param maxPoolSize the most connections the pool may hold, at least 1
     */
    public synchronized HikariDataSource newDataSource(int maxPoolSize) {
        ensureOpen();
        if (maxPoolSize < 1) {
            throw new IllegalArgumentException("maxPoolSize must be at least 1, got " + maxPoolSize);
        }
        return pool(name + "_pool" + (++poolCounter), maxPoolSize);
    }

    private HikariDataSource pool(String poolName, int maxPoolSize) {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(jdbcUrl());
        config.setUsername(user());
        config.setPassword(password());
        config.setPoolName(poolName);
        config.setMaximumPoolSize(maxPoolSize);
        config.setMinimumIdle(Math.min(2, maxPoolSize));
        config.setConnectionTimeout(10_000);
        HikariDataSource pool = new HikariDataSource(config);
        pools.add(pool);
        return pool;
    }

    /** A new plain JDBC connection (no pool), which the caller closes. */
    public Connection connection() throws SQLException {
        synchronized (this) {
            ensureOpen();
        }
        return server.connect(name);
    }

    /**
     * Connections currently borrowed from {@link #dataSource()} (0 if it was never used); a leak check reads this after each test.
     */
    public synchronized int activeConnections() {
        return dataSource == null || dataSource.isClosed() ? 0 : dataSource.getHikariPoolMXBean().getActiveConnections();
    }

    /** Closes {@link #dataSource()} and any pool from {@link #newDataSource(int)} still open, then drops the database. Idempotent. */
    @Override
    public void close() {
        List<HikariDataSource> toClose;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            toClose = new ArrayList<>(pools);
            pools.clear();
        }
        RuntimeException failure = null;
        for (HikariDataSource pool : toClose) {
            try {
                pool.close();
            } catch (RuntimeException e) {
                failure = e;
            }
        }
        server.dropDatabase(name);
        if (failure != null) {
            throw failure;
        }
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("Database " + name + " is closed");
        }
    }

    @Override
    public String toString() {
        return "TestDatabase[" + name + " on " + server.describe() + "]";
    }
}
