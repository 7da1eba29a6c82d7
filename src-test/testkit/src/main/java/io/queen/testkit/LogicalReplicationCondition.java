package io.queen.testkit;

import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.commons.support.AnnotationSupport;

/** The condition behind {@link RequiresLogicalReplication}: enabled only when {@code SHOW wal_level} is {@code logical}. */
final class LogicalReplicationCondition implements ExecutionCondition {

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        if (!AnnotationSupport.isAnnotated(context.getElement(), RequiresLogicalReplication.class)) {
            return ConditionEvaluationResult.enabled("no @RequiresLogicalReplication here");
        }
        PostgresServer server = PostgresServer.get();
        String walLevel = server.setting("wal_level");
        return "logical".equals(walLevel)
                ? ConditionEvaluationResult.enabled("wal_level is logical on " + server.describe())
                : ConditionEvaluationResult.disabled("needs wal_level=logical, but " + server.describe() + " has wal_level=" + walLevel);
    }
}
