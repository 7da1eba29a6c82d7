package io.queen.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.testkit.engine.EventConditions.container;
import static org.junit.platform.testkit.engine.EventConditions.event;
import static org.junit.platform.testkit.engine.EventConditions.finishedSuccessfully;
import static org.junit.platform.testkit.engine.EventConditions.finishedWithFailure;
import static org.junit.platform.testkit.engine.EventConditions.skippedWithReason;
import static org.junit.platform.testkit.engine.EventConditions.test;
import static org.junit.platform.testkit.engine.TestExecutionResultConditions.instanceOf;
import static org.junit.platform.testkit.engine.TestExecutionResultConditions.message;

import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;

/** Runs {@link LeakFixtures} through the JUnit engine and checks what the extension's leak check and conditions report. */
@Timeout(120)
class LeakCheckTest {

    @AfterEach
    void releaseLeftoverThreads() throws InterruptedException {
        LeakFixtures.RELEASE.countDown();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith(PostgresExtension.THREAD_PREFIX)) {
                t.join(5_000);
            }
        }
        LeakFixtures.RELEASE = new CountDownLatch(1);
    }

    @Test
    void failsATestThatLeavesAQueenThreadRunning() {
        Events events = run(LeakFixtures.LeaksAThread.class);
        events.assertStatistics(stats -> stats.started(1).failed(1));
        events.assertThatEvents().haveExactly(1, event(test("leaks"),
                finishedWithFailure(instanceOf(AssertionError.class), message(m -> m.contains("thread \"queen-leaky\"")))));
    }

    @Test
    void waitsForThreadsThatEndShortly() {
        run(LeakFixtures.ThreadEndsSoon.class).assertStatistics(stats -> stats.started(1).succeeded(1));
    }

    @Test
    void failsATestThatKeepsAPoolConnection() {
        Events events = run(LeakFixtures.LeaksAConnection.class);
        events.assertStatistics(stats -> stats.started(1).failed(1));
        events.assertThatEvents().haveExactly(1, event(test("leaks"),
                finishedWithFailure(message(m -> m.contains("1 connection(s) still borrowed from pool leaksaconnection_")))));
    }

    @Test
    void allowLingeringThreadsSkipsTheCheckBetweenTests() {
        EngineTestKit.engine("junit-jupiter").selectors(selectClass(LeakFixtures.LingersOnPurpose.class)).execute()
                .allEvents().assertStatistics(stats -> stats.failed(0).succeeded(4)); // engine, class and two tests
    }

    @Test
    void allowLingeringThreadsStillFailsTheClassIfThreadsOutliveAfterAll() {
        Events all = EngineTestKit.engine("junit-jupiter").selectors(selectClass(LeakFixtures.LingersPastAfterAll.class)).execute()
                .allEvents();
        all.assertThatEvents().haveExactly(1, event(container(LeakFixtures.LingersPastAfterAll.class),
                finishedWithFailure(message(m -> m.contains("queen-forgotten")))));
        all.assertThatEvents().haveExactly(1, event(test("starts"), org.junit.platform.testkit.engine.EventConditions.finishedSuccessfully()));
    }

    @Test
    void versionConditionDisablesWithAReason() {
        Events events = run(LeakFixtures.NeedsPostgres99.class);
        events.assertThatEvents().haveExactly(1, event(test("tooNew"),
                skippedWithReason(reason -> reason.startsWith("needs PostgreSQL 99 or later, but "))));
        events.assertThatEvents().haveExactly(1, event(test("tooNewWithAReason"),
                skippedWithReason(reason -> reason.startsWith("needs PostgreSQL 99 or later (a feature of 99), but "))));
        events.assertThatEvents().haveExactly(1, event(test("anySupportedVersion"), finishedSuccessfully()));
        boolean on17 = PostgresServer.get().serverVersionNum() / 10000 == 17;
        events.assertThatEvents().haveExactly(1, event(test("exactly17"),
                on17 ? finishedSuccessfully() : skippedWithReason(reason -> reason.startsWith("needs PostgreSQL 17 to 17, but "))));
        events.assertStatistics(stats -> stats.skipped(on17 ? 2 : 3).succeeded(on17 ? 2 : 1));
    }

    @Test
    void tagAnnotationsCarryTheirTags() {
        assertThat(Slow.class.getAnnotation(Tag.class).value()).isEqualTo("slow");
        assertThat(RequiresLogicalReplication.class.getAnnotation(Tag.class).value()).isEqualTo("replication");
    }

    private static Events run(Class<?> fixture) {
        return EngineTestKit.engine("junit-jupiter").selectors(selectClass(fixture)).execute().testEvents();
    }
}
