/**
 * Queen's shared test kit: a real PostgreSQL for tests and examples (an embedded 17 by default).
 *
 * <ul>
 *   <li>{@link io.queen.testkit.PostgresServer}: one server per JVM, started lazily: an external server given by
 *       {@code QUEEN_TEST_JDBC_URL}, else an embedded PostgreSQL with logical decoding on (17, or the version
 *       {@code -Dzonky.binaries.version} names, e.g. 18.1.0), else (only if that fails and Docker answers, or when asked for) a
 *       Testcontainers {@code postgres} of the same major version.</li>
 *   <li>{@link io.queen.testkit.TestDatabase}: a fresh database per caller, with pools and plain connections, dropped on close.
 *       Every session on it runs in the time zone {@code America/Sao_Paulo} so that hidden UTC assumptions fail.</li>
 *   <li>{@link io.queen.testkit.QueenPostgres} / {@link io.queen.testkit.PostgresExtension}: a JUnit 5 extension giving each test
 *       class its own database, injecting {@link io.queen.testkit.TestDatabase} and {@link javax.sql.DataSource} parameters, and
 *       failing tests that leak {@code queen-*} threads or pool connections ({@link io.queen.testkit.AllowLingeringThreads} opts
 *       out per class).</li>
 *   <li>Tags and conditions: {@link io.queen.testkit.Slow}, {@link io.queen.testkit.RequiresLogicalReplication},
 *       {@link io.queen.testkit.EnabledForPostgresVersion}.</li>
 *   <li>{@link io.queen.testkit.ChildJvm}: a main class in a separate JVM, for kill -9 tests.</li>
 * </ul>
 *
 * <p>The kit keeps no state in statics except the lazily started server.
 */
package io.queen.testkit;
