package io.queen.testkit;

import java.util.Optional;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.commons.support.AnnotationSupport;

/** The condition behind {@link EnabledForPostgresVersion}, reading {@code server_version_num}. */
final class PostgresVersionCondition implements ExecutionCondition {

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        Optional<EnabledForPostgresVersion> annotation =
                AnnotationSupport.findAnnotation(context.getElement(), EnabledForPostgresVersion.class);
        if (annotation.isEmpty()) {
            return ConditionEvaluationResult.enabled("no @EnabledForPostgresVersion here");
        }
        PostgresServer server = PostgresServer.get();
        int major = server.serverVersionNum() / 10000;
        int min = annotation.get().min();
        int max = annotation.get().max();
        String range = max == Integer.MAX_VALUE ? min + " or later" : min + " to " + max;
        String why = annotation.get().reason().isBlank() ? "" : " (" + annotation.get().reason() + ")";
        return major >= min && major <= max
                ? ConditionEvaluationResult.enabled("PostgreSQL " + major + " is in " + range)
                : ConditionEvaluationResult.disabled("needs PostgreSQL " + range + why + ", but " + server.describe() + " is " + major);
    }
}
