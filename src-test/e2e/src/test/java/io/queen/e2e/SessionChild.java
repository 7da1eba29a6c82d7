package io.queen.e2e;

import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A consumer in its own JVM, for {@link SessionTimeoutIT}: like {@link ConsumerChild}, but with a fixed node
 * id, a session timeout, and pops that lease many partitions at once. For each message it records the
 * message in the table {@code handled} (plain JDBC, autocommit), prints {@code HANDLED <n> <partition>} and
 * sleeps, so a SIGKILL lands while it holds leases over many partitions.
 *
 * <p>Arguments: {@code jdbcUrl user password queue nodeId sessionTimeoutMillis batch partitions concurrency
 * sleepMillis}. Runs until killed.
 */
public final class SessionChild {
  private SessionChild() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String user = args[1];
    String password = args[2];
    String queue = args[3];
    String nodeId = args[4];
    long sessionMillis = Long.parseLong(args[5]);
    int batch = Integer.parseInt(args[6]);
    int partitions = Integer.parseInt(args[7]);
    int concurrency = Integer.parseInt(args[8]);
    long sleepMillis = Long.parseLong(args[9]);
    int pid = (int) ProcessHandle.current().pid();

    Queen queen = EmbeddedQueen.builder().jdbcUrl(url, user, password).poolSize(concurrency + 3).nodeId(nodeId)
        .sessionTimeout(Duration.ofMillis(sessionMillis)).start();
    ThreadLocal<Connection> connection = ThreadLocal.withInitial(() -> {
      try {
        return DriverManager.getConnection(url, user, password);
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    });
    AtomicInteger handled = new AtomicInteger();
    queen.queue(queue).consumer().batch(batch).partitions(partitions).concurrency(concurrency).consume(m -> {
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
      System.out.println("HANDLED " + handled.incrementAndGet() + " " + m.partition());
      Thread.sleep(sleepMillis);
    });
    System.out.println("READY " + pid);
    new CountDownLatch(1).await(); // until killed
  }
}
