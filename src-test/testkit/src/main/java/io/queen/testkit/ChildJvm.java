package io.queen.testkit;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A {@code main} class running in a separate JVM with this JVM's class path, for tests that kill a process mid-work.
 *
 * <p>The child's stdout and stderr are merged and kept, line by line, in a thread-safe buffer ({@link #lines()}, {@link #output()});
 * {@link #awaitLine(Predicate, Duration)} waits for the child to print a line. {@link #kill()} sends SIGKILL (on Linux
 * {@link Process#destroyForcibly()} is {@code kill -9}); {@link #close()} kills the child and waits for it.
 *
 * <pre>{@code
 * try (ChildJvm child = ChildJvm.builder(Worker.class).env("DB_URL", db.jdbcUrl()).start()) {
 *     child.awaitLine(line -> line.contains("ready"), Duration.ofSeconds(30));
 *     child.kill();
 *     assertThat(child.awaitExit(Duration.ofSeconds(10))).isEqualTo(137);
 * }
 * }</pre>
 */
public final class ChildJvm implements AutoCloseable {

    private static final int MAX_LINES = 100_000;
    private static final int MAX_COMMAND_ARG = 100_000;

    private final Process process;
    private final String description;
    private final Thread pump;
    private final Path argFile;
    private final PrintStream echo;
    private final Object lock = new Object();
    private final List<String> lines = new ArrayList<>(); // guarded by lock
    private long dropped; // lines removed from the front of `lines` to bound memory; guarded by lock
    private long cursor; // absolute index of the line after the last one awaitLine returned; guarded by lock
    private boolean outputEnded; // guarded by lock

    private ChildJvm(Process process, String description, Path argFile, PrintStream echo) {
        this.process = process;
        this.description = description;
        this.argFile = argFile;
        this.echo = echo;
        this.pump = new Thread(this::pumpOutput, "childjvm-" + process.pid() + "-output");
        this.pump.setDaemon(true);
        this.pump.start();
    }

    /** Starts {@code mainClass} in a child JVM with the given arguments, this JVM's class path and environment. */
    public static ChildJvm start(Class<?> mainClass, String... args) {
        return builder(mainClass).args(args).start();
    }

    /** A builder for a child JVM running {@code mainClass}. */
    public static Builder builder(Class<?> mainClass) {
        return new Builder(mainClass.getName());
    }

    /** A builder for a child JVM running the class named {@code mainClassName}. */
    public static Builder builder(String mainClassName) {
        return new Builder(mainClassName);
    }

    /** Configures and starts a {@link ChildJvm}. Not thread-safe. */
    public static final class Builder {
        private final String mainClass;
        private final List<String> args = new ArrayList<>();
        private final List<String> jvmOptions = new ArrayList<>();
        private final Map<String, String> env = new LinkedHashMap<>();
        private String classPath = System.getProperty("java.class.path");
        private PrintStream echo;

        private Builder(String mainClass) {
            this.mainClass = mainClass;
        }

        /** Adds program arguments. */
        public Builder args(String... args) {
            this.args.addAll(Arrays.asList(args));
            return this;
        }

        /** Adds JVM options such as {@code -Xmx256m} or {@code -Dkey=value}, placed before the main class. */
        public Builder jvmOptions(String... options) {
            this.jvmOptions.addAll(Arrays.asList(options));
            return this;
        }

        /** Sets an environment variable for the child (which otherwise inherits this JVM's environment); null removes it. */
        public Builder env(String name, String value) {
            env.put(name, value);
            return this;
        }

        /** Sets several environment variables, as {@link #env(String, String)}. */
        public Builder env(Map<String, String> variables) {
            env.putAll(variables);
            return this;
        }

        /** Replaces the class path, which defaults to this JVM's {@code java.class.path}. */
        public Builder classPath(String classPath) {
            this.classPath = classPath;
            return this;
        }

        /** Also copies every line the child prints to {@code stream}, prefixed with the child's pid; off by default. */
        public Builder echoTo(PrintStream stream) {
            this.echo = stream;
            return this;
        }

        /** Starts the child JVM. */
        public ChildJvm start() {
            List<String> command = new ArrayList<>();
            command.add(javaExecutable());
            Path argFile = null;
            if (classPath.length() > MAX_COMMAND_ARG) {
                // Linux caps one command-line argument at 128 KiB; a java @argfile has no such limit.
                try {
                    argFile = Files.createTempFile("childjvm-", ".args");
                    Files.writeString(argFile, "-cp \"" + classPath.replace("\\", "\\\\").replace("\"", "\\\"") + "\"\n");
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
                command.add("@" + argFile);
            } else {
                command.add("-cp");
                command.add(classPath);
            }
            command.addAll(jvmOptions);
            command.add(mainClass);
            command.addAll(args);
            ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
            env.forEach((name, value) -> {
                if (value == null) {
                    builder.environment().remove(name);
                } else {
                    builder.environment().put(name, value);
                }
            });
            try {
                return new ChildJvm(builder.start(), mainClass + " " + String.join(" ", args), argFile, echo);
            } catch (IOException e) {
                throw new UncheckedIOException("Could not start a child JVM for " + mainClass, e);
            }
        }

        private static String javaExecutable() {
            Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
            if (Files.isExecutable(java)) {
                return java.toString();
            }
            Optional<String> current = ProcessHandle.current().info().command();
            return current.orElse("java");
        }
    }

    private void pumpOutput() {
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (echo != null) {
                    echo.println("[child " + process.pid() + "] " + line);
                }
                synchronized (lock) {
                    lines.add(line);
                    if (lines.size() > MAX_LINES) {
                        int drop = MAX_LINES / 2;
                        lines.subList(0, drop).clear();
                        dropped += drop;
                    }
                    lock.notifyAll();
                }
            }
        } catch (IOException e) {
            // the stream closes when the child dies
        } finally {
            synchronized (lock) {
                outputEnded = true;
                lock.notifyAll();
            }
        }
    }

    /** The child's process id. */
    public long pid() {
        return process.pid();
    }

    /** Whether the child is still running. */
    public boolean isAlive() {
        return process.isAlive();
    }

    /**
     * Waits until the child prints a line matching {@code condition}, looking first at lines printed since the line the previous call
     * returned (from the start on the first call), and returns it.
     *
     * @throws AssertionError when no such line comes within {@code timeout}, or the child's output ends first; the message holds
     *     the child's recent output
     */
    public String awaitLine(Predicate<String> condition, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (lock) {
            while (true) {
                for (long i = Math.max(cursor, dropped); i < dropped + lines.size(); i++) {
                    String line = lines.get((int) (i - dropped));
                    if (condition.test(line)) {
                        cursor = i + 1;
                        return line;
                    }
                }
                cursor = dropped + lines.size();
                if (outputEnded) {
                    throw new AssertionError("Child JVM " + description + " ended its output without the awaited line"
                            + exitNote() + "; output:\n" + tail());
                }
                long remaining = deadline - System.nanoTime();
                if (remaining <= 0) {
                    throw new AssertionError("Child JVM " + description + " did not print the awaited line within " + timeout
                            + exitNote() + "; output:\n" + tail());
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(lock, remaining);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError("Interrupted while waiting for child JVM " + description, e);
                }
            }
        }
    }

    private String exitNote() {
        return process.isAlive() ? "" : " (exited with " + process.exitValue() + ")";
    }

    private String tail() {
        List<String> snapshot = lines();
        return String.join("\n", snapshot.subList(Math.max(0, snapshot.size() - 50), snapshot.size()));
    }

    /** A copy of the lines the child printed so far (the most recent 100,000 at most), stdout and stderr merged. */
    public List<String> lines() {
        synchronized (lock) {
            return List.copyOf(lines);
        }
    }

    /** The child's output so far, as one string with a newline after each line. */
    public String output() {
        StringBuilder sb = new StringBuilder();
        for (String line : lines()) {
            sb.append(line).append('\n');
        }
        return sb.toString();
    }

    /** Sends SIGKILL to the child; returns at once (see {@link #awaitExit(Duration)}). */
    public void kill() {
        process.destroyForcibly();
    }

    /** Sends SIGTERM to the child, which runs its shutdown hooks; returns at once. */
    public void terminate() {
        process.destroy();
    }

    /**
     * Waits for the child to exit and returns its exit code (137 after {@link #kill()}, 143 after an unhandled {@link #terminate()}).
     *
     * @throws AssertionError when it is still running after {@code timeout}
     */
    public int awaitExit(Duration timeout) {
        try {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError("Child JVM " + description + " still running after " + timeout + "; output:\n" + tail());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("Interrupted while waiting for child JVM " + description, e);
        }
        return process.exitValue();
    }

    /** Kills the child if it is running, waits for it to exit and for its output to be read. */
    @Override
    public void close() {
        process.destroyForcibly();
        try {
            process.waitFor(30, TimeUnit.SECONDS);
            pump.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (argFile != null) {
                try {
                    Files.deleteIfExists(argFile);
                } catch (IOException ignored) {
                    // a leftover temp file is harmless
                }
            }
        }
    }

    @Override
    public String toString() {
        return "ChildJvm[pid " + process.pid() + ", " + description + "]";
    }
}
