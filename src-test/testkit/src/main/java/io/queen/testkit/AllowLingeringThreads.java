package io.queen.testkit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Turns off {@link PostgresExtension}'s leak check after each test of the annotated class, for classes that deliberately keep a
 * broker (its {@code queen-*} threads and pool connections) running from one test to the next. The {@code queen-*} threads must still
 * be gone once the class's {@code @AfterAll} methods have run: the extension checks that after all tests instead.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
public @interface AllowLingeringThreads {
}
