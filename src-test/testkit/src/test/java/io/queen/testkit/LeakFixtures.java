package io.queen.testkit;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Test classes that {@link LeakCheckTest} runs through the JUnit engine (this file is not named *Test, so Surefire does not run them
 * directly). Threads they leave behind wait on {@link #RELEASE}, which the outer test opens.
 */
final class LeakFixtures {

    static volatile CountDownLatch RELEASE = new CountDownLatch(1);

    private LeakFixtures() {
    }

    static Thread startThread(String name, long maxMillis) {
        CountDownLatch release = RELEASE;
        Thread thread = new Thread(() -> {
            try {
                release.await(maxMillis, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, name);
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    @QueenPostgres
    static class LeaksAThread {
        @Test
        void leaks() {
            startThread("queen-leaky", 60_000);
        }
    }

    @QueenPostgres
    static class ThreadEndsSoon {
        @Test
        void threadEndsWithinTheGracePeriod() {
            startThread("queen-short", 300);
        }
    }

    @QueenPostgres
    static class LeaksAConnection {
        @Test
        void leaks(DataSource dataSource) throws SQLException {
            Connection notClosed = dataSource.getConnection();
            notClosed.isValid(1);
        }
    }

    @QueenPostgres
    @AllowLingeringThreads
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    @TestMethodOrder(MethodOrderer.OrderAnnotation.class)
    static class LingersOnPurpose {
        private final CountDownLatch stop = new CountDownLatch(1);
        private Thread thread;

        @Test
        @Order(1)
        void starts() {
            thread = new Thread(() -> {
                try {
                    stop.await(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "queen-lingering");
            thread.start();
        }

        @Test
        @Order(2)
        void isStillRunning() {
            if (!thread.isAlive()) {
                throw new AssertionError("thread should still run");
            }
        }

        @AfterAll
        void stop() throws InterruptedException {
            stop.countDown();
            thread.join(5_000);
        }
    }

    @QueenPostgres
    @AllowLingeringThreads
    static class LingersPastAfterAll {
        @Test
        void starts() {
            startThread("queen-forgotten", 60_000);
        }
    }

    @QueenPostgres
    static class NeedsPostgres99 {
        @Test
        @EnabledForPostgresVersion(min = 99)
        void tooNew() {
        }

        @Test
        @EnabledForPostgresVersion(min = 99, reason = "a feature of 99")
        void tooNewWithAReason() {
        }

        @Test
        @EnabledForPostgresVersion(min = 15)
        void anySupportedVersion() {
        }

        @Test
        @EnabledForPostgresVersion(min = 17, max = 17)
        void exactly17() {
        }
    }
}
