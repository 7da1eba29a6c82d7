package io.queen.testkit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Runs the annotated test or class only when the server's major version ({@code server_version_num / 10000}) is between
 * {@link #min()} and {@link #max()}, both inclusive; otherwise it is disabled, and the reason names the range, the
 * server and {@link #reason()}.
 *
 * <pre>{@code
 * @EnabledForPostgresVersion(min = 17, reason = "the source connector needs PostgreSQL 17")
 * }</pre>
 * Listed before {@link RequiresLogicalReplication} on the same element, it is the reason a test is disabled for when both
 * would disable it.
 */
@Target({ElementType.TYPE, ElementType.METHOD, ElementType.ANNOTATION_TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
@ExtendWith(PostgresVersionCondition.class)
public @interface EnabledForPostgresVersion {

    /** The lowest major version that runs the test, e.g. 17. */
    int min();

    /** The highest major version that runs the test; no upper bound by default. */
    int max() default Integer.MAX_VALUE;

    /** Why the test needs those versions, for the disabled test's reason; none by default. */
    String reason() default "";
}
