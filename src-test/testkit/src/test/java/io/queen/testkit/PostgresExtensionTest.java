package io.queen.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@QueenPostgres
@Timeout(60)
class PostgresExtensionTest {

    private final TestDatabase constructorDatabase;

    PostgresExtensionTest(TestDatabase database) {
        this.constructorDatabase = database;
    }

    @BeforeAll
    static void createSchema(DataSource dataSource) throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE made_before_all (id int PRIMARY KEY)");
        }
    }

    @BeforeEach
    void beforeEach(TestDatabase database) {
        assertThat(database).isSameAs(constructorDatabase);
    }

    @Test
    void injectsOneDatabasePerClassEverywhere(TestDatabase database, DataSource dataSource) throws SQLException {
        assertThat(database).isSameAs(constructorDatabase);
        assertThat(dataSource).isSameAs(database.dataSource());
        assertThat(database.name()).startsWith("postgresextensiontest_");
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT current_database(), to_regclass('made_before_all') IS NOT NULL")) {
            rs.next();
            assertThat(rs.getString(1)).isEqualTo(database.name());
            assertThat(rs.getBoolean(2)).isTrue();
        }
    }

    @Test
    void poolIsHikariWithTwentyConnectionsNamedAfterTheDatabase(TestDatabase database) {
        var pool = (com.zaxxer.hikari.HikariDataSource) database.dataSource();
        assertThat(pool.getMaximumPoolSize()).isEqualTo(20);
        assertThat(pool.getPoolName()).isEqualTo(database.name());
    }

    @Nested
    class Inner {
        @Test
        void sharesTheTopLevelClassDatabase(TestDatabase database) {
            assertThat(database).isSameAs(constructorDatabase);
        }
    }
}
