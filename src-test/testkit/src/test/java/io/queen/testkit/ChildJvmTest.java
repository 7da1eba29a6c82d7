package io.queen.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class ChildJvmTest {

    @Test
    void startsMainReadsItsLinesAndKillsIt() {
        try (ChildJvm child = ChildJvm.builder(ChildMain.class).args("a", "b c").env("CHILD_GREETING", "olá").start()) {
            String ready = child.awaitLine(line -> line.startsWith("ready"), Duration.ofSeconds(30));

            assertThat(ready).isEqualTo("ready pid=" + child.pid());
            assertThat(child.lines()).contains("starting a,b c", "greeting=olá");
            assertThat(child.isAlive()).isTrue();

            child.kill();

            assertThat(child.awaitExit(Duration.ofSeconds(10))).isEqualTo(137); // 128 + SIGKILL
            assertThat(child.isAlive()).isFalse();
            assertThat(child.output()).doesNotContain("woke up");
        }
    }

    @Test
    void awaitLineMovesPastTheLineItReturned() {
        try (ChildJvm child = ChildJvm.start(ChildMain.class, "x")) {
            assertThat(child.awaitLine(line -> !line.isEmpty(), Duration.ofSeconds(30))).startsWith("starting");
            assertThat(child.awaitLine(line -> !line.isEmpty(), Duration.ofSeconds(30))).startsWith("greeting=");
            assertThat(child.awaitLine(line -> !line.isEmpty(), Duration.ofSeconds(30))).startsWith("ready");
        }
    }

    @Test
    void awaitLineFailsFastWhenTheChildExits() {
        try (ChildJvm child = ChildJvm.start(ChildMain.class, "exit", "3")) {
            assertThatThrownBy(() -> child.awaitLine(line -> line.startsWith("ready"), Duration.ofSeconds(30)))
                    .isInstanceOf(AssertionError.class)
                    .hasMessageContaining("ended its output")
                    .hasMessageContaining("starting exit,3");
            assertThat(child.awaitExit(Duration.ofSeconds(10))).isEqualTo(3);
        }
    }

    @Test
    void awaitLineTimesOut() {
        try (ChildJvm child = ChildJvm.start(ChildMain.class)) {
            child.awaitLine(line -> line.startsWith("ready"), Duration.ofSeconds(30));
            assertThatThrownBy(() -> child.awaitLine(line -> line.equals("never"), Duration.ofMillis(200)))
                    .isInstanceOf(AssertionError.class)
                    .hasMessageContaining("did not print the awaited line within PT0.2S");
        }
    }
}
