package io.queen.testkit;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

/**
 * Captures what every thread writes to {@code System.err} and {@code System.out} while it is open (the
 * tests log through slf4j-simple, which writes to the current {@code System.err}), and still passes it
 * through. For tests that check log lines: what an operator sees, and what must never be in it.
 *
 * <pre>{@code
 * try (LogCapture logs = LogCapture.start()) {
 *   ...
 *   assertThat(logs.lines()).anyMatch(l -> l.contains("WARN") && l.contains("dead-lettered"));
 * }
 * }</pre>
 */
public final class LogCapture implements AutoCloseable {
  private final PrintStream oldErr;
  private final PrintStream oldOut;
  private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();

  private LogCapture() {
    oldErr = System.err;
    oldOut = System.out;
    System.setErr(new PrintStream(new Tee(oldErr), true, StandardCharsets.UTF_8));
    System.setOut(new PrintStream(new Tee(oldOut), true, StandardCharsets.UTF_8));
  }

  /** Starts capturing; close to stop. */
  public static LogCapture start() {
    return new LogCapture();
  }

  /** Everything written so far. */
  public String text() {
    synchronized (buffer) {
      return buffer.toString(StandardCharsets.UTF_8);
    }
  }

  /** Everything written so far, line by line. */
  public List<String> lines() {
    return Arrays.asList(text().split("\\R"));
  }

  /** The lines that contain every one of {@code parts}. */
  public List<String> linesWith(String... parts) {
    return lines().stream().filter(l -> Arrays.stream(parts).allMatch(l::contains)).collect(Collectors.toList());
  }

  @Override
  public void close() {
    System.setErr(oldErr);
    System.setOut(oldOut);
  }

  private final class Tee extends OutputStream {
    private final OutputStream through;

    Tee(OutputStream through) {
      this.through = through;
    }

    @Override
    public void write(int b) {
      synchronized (buffer) {
        buffer.write(b);
      }
      try {
        through.write(b);
      } catch (java.io.IOException ignored) {
        // the pass-through is best effort
      }
    }

    @Override
    public void write(byte[] b, int off, int len) {
      synchronized (buffer) {
        buffer.write(b, off, len);
      }
      try {
        through.write(b, off, len);
      } catch (java.io.IOException ignored) {
        // the pass-through is best effort
      }
    }
  }
}
