package io.queen.testkit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.BooleanSupplier;
import javax.sql.DataSource;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * JUnit 5 extension behind {@link QueenPostgres}.
 *
 * <ul>
 *   <li>Before all tests of a class it creates a fresh {@link TestDatabase} on the JVM's {@link PostgresServer}, named after the
 *       class, and keeps it in the class's {@link ExtensionContext.Store}; after all tests it drops it. {@code @Nested} classes
 *       share the database of their top-level class.</li>
 *   <li>It resolves parameters of type {@link TestDatabase} and {@link DataSource} (the database's shared pool) in test methods,
 *       constructors and lifecycle methods.</li>
 *   <li>After each test it checks for leaks, waiting up to 5 seconds for things to settle: the test fails if a live thread whose
 *       name starts with {@code queen-} remains, or if connections borrowed from the shared pool were not returned. Classes
 *       annotated {@link AllowLingeringThreads} skip this per-test check. For every class, {@code queen-} threads must be gone
 *       once its {@code @AfterAll} methods have run.</li>
 * </ul>
 * The leak check looks at all threads of the JVM, so it assumes tests of classes using this extension do not run in parallel.
 */
public final class PostgresExtension implements BeforeAllCallback, AfterAllCallback, AfterEachCallback, ParameterResolver {

    /** Threads whose names start with this belong to Queen and must not outlive a test. */
    public static final String THREAD_PREFIX = "queen-";

    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(PostgresExtension.class);
    private static final String DATABASE = "database";
    private static final Duration LEAK_WAIT = Duration.ofSeconds(5);
    private static final int MAX_PREFIX = 30;

    /** Creates the extension; JUnit does this for {@link QueenPostgres}. */
    public PostgresExtension() {
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        database(context);
    }

    @Override
    public void afterEach(ExtensionContext context) {
        if (allowsLingering(context)) {
            return;
        }
        TestDatabase database = owner(context).getStore(NAMESPACE).get(DATABASE, TestDatabase.class);
        List<String> leaks = new ArrayList<>(lingeringThreads());
        if (database != null && !awaitTrue(() -> database.activeConnections() == 0)) {
            leaks.add(database.activeConnections() + " connection(s) still borrowed from pool " + database.name()
                    + " " + LEAK_WAIT.toSeconds() + " s after the test: close every Connection you take from the DataSource");
        }
        if (!leaks.isEmpty()) {
            throw new AssertionError("Leak check failed after " + context.getDisplayName() + ":\n  " + String.join("\n  ", leaks));
        }
    }

    @Override
    public void afterAll(ExtensionContext context) {
        ExtensionContext owner = owner(context);
        if (owner != context) {
            return; // a @Nested class: the top-level class owns the database
        }
        TestDatabase database = owner.getStore(NAMESPACE).remove(DATABASE, TestDatabase.class);
        List<String> threads;
        try {
            threads = lingeringThreads();
        } finally {
            if (database != null) {
                database.close();
            }
        }
        if (!threads.isEmpty()) {
            throw new AssertionError("Leak check failed after all tests of " + context.getDisplayName() + ":\n  "
                    + String.join("\n  ", threads));
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        Class<?> type = parameterContext.getParameter().getType();
        return type == TestDatabase.class || type == DataSource.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        TestDatabase database = database(extensionContext);
        return parameterContext.getParameter().getType() == TestDatabase.class ? database : database.dataSource();
    }

    private static TestDatabase database(ExtensionContext context) {
        ExtensionContext owner = owner(context);
        return owner.getStore(NAMESPACE).getOrComputeIfAbsent(DATABASE,
                key -> PostgresServer.get().createDatabase(prefix(owner.getRequiredTestClass())), TestDatabase.class);
    }

    /** The context of the top-level test class: the child of the engine's root context on the way up. */
    private static ExtensionContext owner(ExtensionContext context) {
        ExtensionContext current = context;
        while (current.getParent().isPresent() && current.getParent().get().getParent().isPresent()) {
            current = current.getParent().get();
        }
        return current;
    }

    static String prefix(Class<?> testClass) {
        String prefix = testClass.getSimpleName().toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]+", "_").replaceAll("^[^a-z]+", "");
        if (prefix.isEmpty()) {
            prefix = "test";
        }
        return prefix.substring(0, Math.min(prefix.length(), MAX_PREFIX));
    }

    private static boolean allowsLingering(ExtensionContext context) {
        for (Class<?> c = context.getTestClass().orElse(null); c != null; c = c.getEnclosingClass()) {
            if (AnnotationSupport.isAnnotated(c, AllowLingeringThreads.class)) {
                return true;
            }
        }
        return false;
    }

    /** Descriptions of live {@code queen-*} threads, after waiting up to 5 s for them to end; empty when none are left. */
    private static List<String> lingeringThreads() {
        awaitTrue(() -> queenThreads().isEmpty());
        List<String> found = new ArrayList<>();
        for (Map.Entry<Thread, StackTraceElement[]> entry : queenThreads().entrySet()) {
            Thread thread = entry.getKey();
            StringBuilder sb = new StringBuilder("thread \"").append(thread.getName()).append("\" (")
                    .append(thread.getState()).append(") still alive ").append(LEAK_WAIT.toSeconds()).append(" s after the test");
            StackTraceElement[] stack = entry.getValue();
            for (int i = 0; i < Math.min(stack.length, 6); i++) {
                sb.append("\n      at ").append(stack[i]);
            }
            found.add(sb.toString());
        }
        return found;
    }

    private static Map<Thread, StackTraceElement[]> queenThreads() {
        Map<Thread, StackTraceElement[]> all = new HashMap<>(Thread.getAllStackTraces());
        all.keySet().removeIf(t -> !t.isAlive() || !t.getName().startsWith(THREAD_PREFIX));
        return all;
    }

    /** Polls {@code condition} every 20 ms until it holds or 5 s have passed; returns whether it held. */
    private static boolean awaitTrue(BooleanSupplier condition) {
        long deadline = System.nanoTime() + LEAK_WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return condition.getAsBoolean();
            }
        }
        return true;
    }
}
