package io.queen.testkit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Marks a test that needs logical decoding: tags it {@code replication} and disables it, with the reason, when the server's
 * {@code wal_level} is not {@code logical} (possible with {@code QUEEN_TEST_JDBC_URL}; the embedded server always has it).
 */
@Target({ElementType.TYPE, ElementType.METHOD, ElementType.ANNOTATION_TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Tag("replication")
@ExtendWith(LogicalReplicationCondition.class)
public @interface RequiresLogicalReplication {
}
