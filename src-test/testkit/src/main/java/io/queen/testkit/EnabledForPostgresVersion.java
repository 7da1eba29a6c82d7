package io.queen.testkit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Runs the annotated test or class only when the server's major version ({@code server_version_num / 10000}) is between
 * {@link #min()} and {@link #max()}, both inclusive; otherwise it is disabled with the reason.
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
}
