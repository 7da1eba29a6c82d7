package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.Json;
import io.queen.Kv;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.QueueFullException;
import io.queen.Subscription;
import io.queen.testkit.QueenPostgres;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A payload carrying a marker string, pushed in every way that fails, never shows the marker in
 * an exception (message, causes, suppressed, printed stack trace) or a log line.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NoEchoTest {
  private static final String MARKER = "MARKER-" + UUID.randomUUID();
  private DataSource ds;
  private Queen queen;
  private PrintStream savedErr;
  private PrintStream savedOut;
  private final ByteArrayOutputStream captured = new ByteArrayOutputStream();
  private final List<Throwable> thrown = new ArrayList<>();

  @BeforeEach
  void start(DataSource ds) {
    this.ds = ds;
    savedErr = System.err;
    savedOut = System.out;
    // slf4j-simple (the tests' logging backend) writes to whatever System.err is at the time of the call
    PrintStream tee = new PrintStream(new java.io.OutputStream() {
      @Override
      public void write(int b) {
        captured.write(b);
        savedErr.write(b);
      }

      @Override
      public void write(byte[] b, int off, int len) {
        captured.write(b, off, len);
        savedErr.write(b, off, len);
      }
    }, true, StandardCharsets.UTF_8);
    System.setErr(tee);
    System.setOut(tee);
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("echo").start();
  }

  @AfterEach
  void stop() {
    try {
      queen.close();
    } finally {
      System.setErr(savedErr);
      System.setOut(savedOut);
    }
  }

  private void expectFailure(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      thrown.add(e);
      return;
    }
    throw new AssertionError("expected a failure");
  }

  private static String everything(Throwable t) {
    StringWriter w = new StringWriter();
    t.printStackTrace(new PrintWriter(w)); // message, causes and suppressed, as a log would print them
    StringBuilder sb = new StringBuilder(w.toString());
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      sb.append('\n').append(c).append('\n').append(c.getMessage()).append('\n').append(c.getLocalizedMessage());
      if (c instanceof java.sql.SQLException se && se.getNextException() != null) {
        sb.append('\n').append(everything(se.getNextException()));
      }
    }
    return sb.toString();
  }

  @Test
  void aMarkerInAFailingPayloadNeverAppearsInAnExceptionOrALogLine() throws Exception {
    String q = "echo";
    // refused in Java
    expectFailure(() -> queen.queue(q).push(Json.of(MARKER)));
    expectFailure(() -> queen.queue(q).push(Json.of("{\"a\":\"" + MARKER + "\"} " + MARKER)));
    expectFailure(() -> queen.queue(q).push(Json.of("{\"" + MARKER + "\":\"\\u0000\"}")));
    expectFailure(() -> queen.queue(q).push(Json.of("[\"" + MARKER + "\", " + MARKER + "]")));
    expectFailure(() -> queen.queue(q).push(Map.of("s", MARKER + "x".repeat(9 * 1024 * 1024))));
    expectFailure(() -> queen.kv().put("ns", "k", Map.of("s", MARKER + "x".repeat(70_000)), Kv.forever()));
    expectFailure(() -> queen.kv().put("ns", "k", Json.of(MARKER), Kv.forever()));
    expectFailure(() -> queen.transaction().push(q, "p", Json.of(MARKER + "}")));

    // accepted by Java, refused by PostgreSQL (a number jsonb's numeric cannot hold): the server's Where line
    // quotes the JSON text
    String overflow = "{\"m\":\"" + MARKER + "\",\"n\":1e200000}";
    expectFailure(() -> queen.queue(q).push(Json.of(overflow)));
    expectFailure(() -> queen.kv().put("ns", "k", Json.of(overflow), Kv.forever()));
    expectFailure(() -> queen.transaction().push(q, "p", Json.of(overflow)).commit());
    assertThat(thrown.get(thrown.size() - 3)).isInstanceOf(QueenDatabaseException.class);
    assertThat(((QueenDatabaseException) thrown.get(thrown.size() - 3)).sqlState()).isEqualTo("22003");

    // a full queue
    queen.queue("full").configure(c -> c.maxSize(1));
    queen.queue("full").push(Map.of("s", MARKER));
    expectFailure(() -> queen.queue("full").push(Map.of("s", MARKER)));
    assertThat(thrown.get(thrown.size() - 1)).isInstanceOf(QueueFullException.class);

    // a data error whose primary message quotes the value (class 22): redacted
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select ?::int")) {
      st.setString(1, MARKER);
      st.executeQuery();
    } catch (java.sql.SQLException e) {
      thrown.add(io.queen.embedded.internal.db.Sql.translate("probe", e));
    }

    // a stored payload the reader refuses: logged (WARN) and dead-lettered
    queen.queue(q).push(Map.of("n", 1));
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("update queen.messages m set payload ="
        + " ('{\"m\": \"" + MARKER + "\", \"n\": ' || repeat('9', 2000) || '}')::jsonb")) {
      st.executeUpdate();
    }
    assertThat(queen.queue(q).consumer().pop()).isEmpty();

    // handlers whose own JDBC statements fail on the payload's data (PostgreSQL quotes the value in its message and
    // its detail lines): what Queen logs and keeps as the dead letter's error is reduced to the primary message with
    // the quoted value redacted. (A handler's own exception message is the application's text and is logged as is.)
    queen.queue("h").configure(c -> c.retryLimit(0));
    queen.queue("h").push(Map.of("v", MARKER));
    queen.queue("h").push(Map.of("v", MARKER + "-2"));
    try (Subscription s = queen.queue("h").consumer().consume(m -> {
      try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select ?::int")) {
        st.setString(1, m.payload().get("v").asText());
        st.executeQuery();
      }
    })) {
      await().atMost(Duration.ofSeconds(30)).until(() -> queen.deadLetters("h").defaultGroup().count() == 2);
    }
    assertThat(queen.deadLetters("h").defaultGroup().list(10, null))
        .allSatisfy(d -> assertThat(d.error()).contains("invalid input syntax for type integer").doesNotContain(MARKER));

    assertThat(thrown).hasSize(13);
    for (Throwable t : thrown) {
      assertThat(everything(t)).as(t.getClass().getName()).doesNotContain(MARKER);
    }
    System.err.flush();
    String logs = captured.toString(StandardCharsets.UTF_8);
    assertThat(logs).contains("cannot be decoded").contains("handler of queue 'h' (default group) failed on")
        .contains("dead-lettered queue 'h' (default group)");
    assertThat(logs).doesNotContain(MARKER);
  }
}
