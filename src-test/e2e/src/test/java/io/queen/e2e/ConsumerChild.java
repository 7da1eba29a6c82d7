package io.queen.e2e;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A consumer in its own JVM, for {@link CrashIT}: starts Queen against the database given as
 * arguments and consumes one queue's default group. For each message it first records the message in
 * the table {@code handled} of the same database (plain JDBC, autocommit, one insert per message), then
 * prints {@code HANDLED <n> <message id>} and sleeps a little, so that a SIGKILL lands in the middle of
 * a batch. A message whose payload has {@code "poison": true} is recorded and then halts the JVM at
 * once ({@code Runtime.halt}), like a crash.
 *
 * <p>Arguments: {@code jdbcUrl user password queue batch concurrency sleepMillis}. Runs until killed.
 */
public final class ConsumerChild {
  private ConsumerChild() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String user = args[1];
    String password = args[2];
    String queue = args[3];
    int batch = Integer.parseInt(args[4]);
    int concurrency = Integer.parseInt(args[5]);
    long sleepMillis = Long.parseLong(args[6]);
    int pid = (int) ProcessHandle.current().pid();

    Queen queen = EmbeddedQueen.builder().jdbcUrl(url, user, password).poolSize(concurrency + 3)
        .nodeId("child-" + pid).start();
    ThreadLocal<Connection> connection = ThreadLocal.withInitial(() -> {
      try {
        return DriverManager.getConnection(url, user, password);
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    });
    AtomicInteger handled = new AtomicInteger();
    queen.queue(queue).consumer().batch(batch).concurrency(concurrency).consume(m -> {
      try (PreparedStatement st = connection.get().prepareStatement(
          "insert into handled(message_id, n, pid, attempt, partition_name, msg_offset) values (?, ?, ?, ?, ?, ?)")) {
        st.setObject(1, m.id());
        st.setInt(2, m.payload().path("n").asInt(-1));
        st.setInt(3, pid);
        st.setInt(4, m.attempt());
        st.setString(5, m.partition());
        st.setLong(6, m.offset());
        st.executeUpdate();
      }
      if (m.payload().path("poison").asBoolean(false)) {
        System.out.println("POISON attempt " + m.attempt() + " " + m.id());
        System.out.flush();
        Runtime.getRuntime().halt(1);
      }
      System.out.println("HANDLED " + handled.incrementAndGet() + " " + m.id());
      Thread.sleep(sleepMillis);
    });
    System.out.println("READY " + pid);
    new CountDownLatch(1).await(); // until killed
  }
}
