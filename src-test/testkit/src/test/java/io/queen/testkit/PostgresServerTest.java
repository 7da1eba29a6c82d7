package io.queen.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.HashSet;
import java.util.Properties;
import java.util.Set;
import java.util.TimeZone;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Proves the kit against the real server, without the JUnit extension. */
@Timeout(120)
class PostgresServerTest {

    private final PostgresServer server = PostgresServer.get();

    @Test
    void describesItselfAndIsAVersionQueenSupports() {
        System.out.println("Tests use " + server.describe() + ", ready in " + server.startupMillis() + " ms");
        assertThat(server.serverVersionNum()).as("the oldest PostgreSQL Queen supports is 15").isGreaterThanOrEqualTo(150000);
        assertThat(PostgresServer.get()).isSameAs(server);
        if (server.kind() == PostgresServer.Kind.EMBEDDED) {
            assertThat(server.describe()).matches("embedded PostgreSQL \\d+\\.\\d+ on port \\d+");
            // the version the build named (surefire hands zonky.binaries.version to this JVM), 17 by default
            String major = EmbeddedBackend.binariesMajor();
            assertThat(server.serverVersionNum() / 10000).isEqualTo(Integer.parseInt(major));
            assertThat(server.describe()).startsWith("embedded PostgreSQL " + major + ".");
        }
    }

    @Test
    void embeddedBinariesVersionsMatchTheServersVersion() {
        assertThat(EmbeddedBackend.runs("18.1", "18.1.0")).isTrue();
        assertThat(EmbeddedBackend.runs("17.6", "17.6.0")).isTrue();
        assertThat(EmbeddedBackend.runs("17.6", "18.1.0")).isFalse();
        assertThat(EmbeddedBackend.runs("18.1", "18.10.0")).isFalse();
        assertThat(EmbeddedBackend.runs("17.1", "17.10.0")).isFalse();
    }

    @Test
    void embeddedServerHasLogicalDecodingAndHonestDurability() {
        assumeTrue(server.kind() == PostgresServer.Kind.EMBEDDED, "settings are only ours on the embedded server");
        assertThat(server.setting("wal_level")).isEqualTo("logical");
        assertThat(server.setting("max_wal_senders")).isEqualTo("10");
        assertThat(server.setting("max_replication_slots")).isEqualTo("10");
        assertThat(server.setting("max_connections")).isEqualTo("300");
        assertThat(server.setting("shared_buffers")).isEqualTo("128MB");
        assertThat(server.setting("fsync")).isEqualTo("on");
        assertThat(server.setting("synchronous_commit")).isEqualTo("on");
    }

    @Test
    void createsADatabaseAndDropsItOnClose() throws SQLException {
        String name;
        try (TestDatabase db = server.createDatabase("kit_lifecycle")) {
            name = db.name();
            assertThat(name).matches("kit_lifecycle_\\d+_[a-z0-9]{6}");
            assertThat(databaseExists(name)).isTrue();
            try (Connection c = db.connection(); Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT current_database(), current_user")) {
                rs.next();
                assertThat(rs.getString(1)).isEqualTo(name);
                assertThat(rs.getString(2)).isEqualTo(db.user());
            }
            db.dataSource().getConnection().close();
            db.newDataSource(2).getConnection().close(); // left open on purpose: close() must close it
        }
        assertThat(databaseExists(name)).isFalse();
    }

    @Test
    void closeDropsADatabaseEvenWithOpenSessions() throws SQLException {
        TestDatabase db = server.createDatabase("kit_force");
        Connection open = db.connection();
        db.close();
        assertThat(databaseExists(db.name())).isFalse();
        assertThat(open.isValid(2)).isFalse();
        open.close();
        db.close(); // idempotent
        assertThatThrownBy(db::dataSource).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void databaseNamesAreUniqueValidAndShort() {
        Set<String> names = new HashSet<>();
        for (int i = 0; i < 200; i++) {
            names.add(server.newDatabaseName("a"));
        }
        assertThat(names).hasSize(200);
        String longName = server.newDatabaseName("x".repeat(100));
        assertThat(longName).hasSizeLessThanOrEqualTo(63).matches("x+_\\d+_[a-z0-9]{6}");
        assertThatThrownBy(() -> server.createDatabase("Bad-Name")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> server.createDatabase("x; DROP DATABASE postgres")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> server.createDatabase("1abc")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    @EnabledForPostgresVersion(min = 17) // login event triggers
    void everySessionRunsInANonUtcTimeZone() throws SQLException {
        try (TestDatabase db = server.createDatabase("kit_tz")) {
            try (Connection c = db.connection()) {
                assertThat(show(c, "TimeZone")).isEqualTo(PostgresServer.SESSION_TIME_ZONE);
                // the zone shows in SQL that renders or truncates times: noon UTC is 09:00 in São Paulo (no DST since 2019)
                try (Statement s = c.createStatement();
                        ResultSet rs = s.executeQuery("SELECT '2024-01-01 12:00:00+00'::timestamptz::text,"
                                + " date_trunc('day', '2024-01-01 01:00:00+00'::timestamptz)")) {
                    rs.next();
                    assertThat(rs.getString(1)).isEqualTo("2024-01-01 09:00:00-03");
                    assertThat(rs.getObject(2, OffsetDateTime.class))
                            .isEqualTo(OffsetDateTime.of(2023, 12, 31, 3, 0, 0, 0, ZoneOffset.UTC));
                }
            }
            for (DataSource ds : new DataSource[] {db.dataSource(), db.newDataSource(1)}) {
                try (Connection c = ds.getConnection()) {
                    assertThat(show(c, "TimeZone")).isEqualTo(PostgresServer.SESSION_TIME_ZONE);
                }
            }
            // the URL on its own, through DriverManager as another library would use it
            try (Connection c = DriverManager.getConnection(db.jdbcUrl(), db.user(), db.password())) {
                assertThat(show(c, "TimeZone")).isEqualTo(PostgresServer.SESSION_TIME_ZONE);
            }
            System.out.println("JVM time zone " + TimeZone.getDefault().getID() + ", session time zone " + PostgresServer.SESSION_TIME_ZONE);
        }
    }

    @Test
    @RequiresLogicalReplication
    @EnabledForPostgresVersion(min = 17)
    void logicalReplicationConnectionsAlsoGetTheTimeZone() throws SQLException {
        try (TestDatabase db = server.createDatabase("kit_walsender")) {
            Properties properties = new Properties();
            properties.setProperty("user", db.user());
            properties.setProperty("password", db.password());
            properties.setProperty("replication", "database");
            properties.setProperty("assumeMinServerVersion", "17");
            properties.setProperty("preferQueryMode", "simple");
            try (Connection c = DriverManager.getConnection(db.jdbcUrl(), properties); Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("IDENTIFY_SYSTEM")) {
                assertThat(rs.next()).isTrue();
                assertThat(show(c, "TimeZone")).isEqualTo(PostgresServer.SESSION_TIME_ZONE);
            }
        }
    }

    @Test
    @RequiresLogicalReplication
    @EnabledForPostgresVersion(min = 17)
    void pgoutputSlotCanBeCreatedAndDropped() throws SQLException {
        try (TestDatabase db = server.createDatabase("kit_slot"); Connection c = db.connection(); Statement s = c.createStatement()) {
            String slot = db.name() + "_slot";
            try (ResultSet rs = s.executeQuery("SELECT slot_name FROM pg_create_logical_replication_slot('" + slot + "', 'pgoutput')")) {
                rs.next();
                assertThat(rs.getString(1)).isEqualTo(slot);
            }
            try (ResultSet rs = s.executeQuery("SELECT plugin, database FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
                assertThat(rs.next()).isTrue();
                assertThat(rs.getString(1)).isEqualTo("pgoutput");
                assertThat(rs.getString(2)).isEqualTo(db.name());
            }
            s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
            try (ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
                rs.next();
                assertThat(rs.getInt(1)).isZero();
            }
        }
    }

    private boolean databaseExists(String name) throws SQLException {
        try (TestDatabase other = server.createDatabase("kit_probe"); Connection c = other.connection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_database WHERE datname = '" + name + "'")) {
            rs.next();
            return rs.getInt(1) == 1;
        }
    }

    private static String show(Connection c, String setting) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW " + setting)) {
            rs.next();
            return rs.getString(1);
        }
    }
}
