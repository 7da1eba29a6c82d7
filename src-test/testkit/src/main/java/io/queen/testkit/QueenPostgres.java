package io.queen.testkit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Gives a test class its own fresh database on the JVM's {@link PostgresServer}: shorthand for
 * {@code @ExtendWith(PostgresExtension.class)}. Test, constructor and lifecycle methods may then declare parameters of type
 * {@link TestDatabase} or {@link javax.sql.DataSource}; after each test a leak check runs (see {@link PostgresExtension}).
 *
 * <pre>{@code
 * @QueenPostgres
 * class OrdersTest {
 *     @Test
 *     void stores(DataSource ds) { ... }
 * }
 * }</pre>
 */
@Target({ElementType.TYPE, ElementType.ANNOTATION_TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ExtendWith(PostgresExtension.class)
public @interface QueenPostgres {
}
