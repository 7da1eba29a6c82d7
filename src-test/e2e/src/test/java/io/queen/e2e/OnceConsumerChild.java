package io.queen.e2e;

import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvOptions;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.Transaction;
import io.queen.embedded.EmbeddedQueen;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A consumer in its own JVM, for {@link ExactlyOnceIT}: every message is processed with an idempotency
 * marker ({@code once(namespace, "msg:" + id, ttl.required())}), an effect and the ack in ONE bundle, so
 * that a SIGKILL at any point leaves either all three or none of them.
 *
 * <p>Two modes:
 * <ul>
 *   <li>{@code commit}: the effect is a message pushed to the queue {@code target} in the bundle, and the
 *       bundle is committed with {@link Transaction#commit()} (Queen owns the transaction);</li>
 *   <li>{@code connection}: the effect is a row inserted with plain JDBC into the table {@code target} on a
 *       connection with auto-commit off, the bundle is applied on that connection with
 *       {@link Transaction#commit(Connection)}, and the worker commits the connection itself.</li>
 * </ul>
 *
 * <p>The worker pops by hand (no consume loop, so no ack is ever made behind the bundle's back), and
 * sleeps {@code sleepMillis} between the effect and the commit so that kills land in that window. Each
 * handling is first recorded (auto-commit) in the table {@code tried} with its outcome filled in
 * afterwards: {@code COMMITTED}, {@code PRECONDITION} (then {@code PRECONDITION_ACKED} or
 * {@code PRECONDITION_<ack outcome>} once the separate ack answered, e.g. {@code PRECONDITION_ALREADY_ACKED}), {@code LEASE_LOST}, {@code FAILED};
 * a row left without outcome was cut by a kill. A payload with {@code "fail": true} makes the handler
 * throw before the commit the first time the message is handled anywhere (in {@code connection} mode
 * after the bundle was applied on the connection, so the caller's rollback must remove the marker); one
 * with {@code "slow": true} sleeps {@code slowMillis} more the first time, past the lease, so another
 * consumer takes the message over and this one's bundle meets the lease fence ({@code LEASE_LOST}), or
 * the new holder's marker first ({@code KV_PRECONDITION}, and then the separate ack is refused).
 *
 * <p>Prints {@code DONE <count> <id>} after each successful commit and one line per other outcome.
 * Arguments: {@code jdbcUrl user password queue mode target namespace workers batch sleepMillis slowMillis}.
 * Runs until killed.
 */
public final class OnceConsumerChild {
  static final String COMMIT = "commit";
  static final String CONNECTION = "connection";
  static final String LOOP = "loop";

  private OnceConsumerChild() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String user = args[1];
    String password = args[2];
    String queue = args[3];
    String mode = args[4];
    String target = args[5];
    String namespace = args[6];
    int workers = Integer.parseInt(args[7]);
    int batch = Integer.parseInt(args[8]);
    long sleepMillis = Long.parseLong(args[9]);
    long slowMillis = Long.parseLong(args[10]);
    if (!mode.equals(COMMIT) && !mode.equals(CONNECTION) && !mode.equals(LOOP)) {
      throw new IllegalArgumentException("mode: " + mode);
    }
    int pid = (int) ProcessHandle.current().pid();

    Queen queen = EmbeddedQueen.builder().jdbcUrl(url, user, password).poolSize(workers + 3)
        .nodeId("once-" + pid).start();
    if (mode.equals(LOOP)) {
      runLoop(queen, url, user, password, queue, target, namespace, workers, batch, sleepMillis, slowMillis, pid);
      return;
    }
    AtomicInteger done = new AtomicInteger();
    for (int w = 0; w < workers; w++) {
      Connection book = DriverManager.getConnection(url, user, password); // bookkeeping, auto-commit
      Connection work = DriverManager.getConnection(url, user, password); // the effect's transaction
      work.setAutoCommit(false);
      Worker worker = new Worker(queen, queue, mode, target, namespace, batch, sleepMillis, slowMillis, pid, book, work,
          done);
      Thread t = new Thread(worker::run, "once-worker-" + w);
      t.start();
    }
    System.out.println("READY " + pid);
    new CountDownLatch(1).await(); // until killed
  }

  /**
   * The {@code loop} mode: the consume loop's transactional handler. The handler adds the marker and the
   * effect to the loop's bundle and sleeps (kills land there); the loop adds the ack and commits. The
   * handler cannot see the commit's outcome, so only failures are recorded in {@code tried}; the effect
   * message names the handling that committed it. A monitor prints {@code DONE <count>} as the
   * subscription's committed count grows.
   */
  private static void runLoop(Queen queen, String url, String user, String password, String queue, String target,
      String namespace, int workers, int batch, long sleepMillis, long slowMillis, int pid) throws Exception {
    KvOptions marker = Kv.ttl(Duration.ofHours(1)).required();
    ThreadLocal<Connection> book = ThreadLocal.withInitial(() -> {
      try {
        return DriverManager.getConnection(url, user, password);
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    });
    Subscription s = queen.queue(queue).consumer().concurrency(workers).batch(batch).consumeInTransaction((m, tx) -> {
      UUID id = m.id();
      long tryId = tried(book.get(), m, pid);
      boolean fail = m.payload().path("fail").asBoolean(false) && firstTime(book.get(), "fail", id);
      boolean slow = m.payload().path("slow").asBoolean(false) && firstTime(book.get(), "slow", id);
      tx.once(namespace, "msg:" + id, marker)
          .push(target, m.partition(), Map.of("messageId", id.toString(), "n", m.payload().path("n").asInt(-1),
              "pid", pid, "tryId", tryId));
      Thread.sleep(sleepMillis + (slow ? slowMillis : 0)); // "the work": a kill here leaves nothing
      if (fail) {
        outcome(book.get(), tryId, "FAILED");
        System.out.println("FAILED " + id);
        throw new HandlerFailure("the handler failed before the loop's commit; nothing was sent");
      }
    });
    System.out.println("READY " + pid);
    long last = -1;
    while (true) { // until killed
      long now = s.acked() + s.alreadyDone();
      if (now != last) {
        System.out.println("DONE " + now + " acked=" + s.acked() + " alreadyDone=" + s.alreadyDone() + " failed="
            + s.failed() + " leaseLost=" + s.leaseLost());
        last = now;
      }
      Thread.sleep(20);
    }
  }

  /** What a failing handler throws. */
  private static final class HandlerFailure extends Exception {
    HandlerFailure(String message) {
      super(message);
    }
  }

  private static final class Worker {
    private static final KvOptions MARKER = Kv.ttl(Duration.ofHours(1)).required();

    private final Queen queen;
    private final String queue;
    private final boolean inCallerTx;
    private final String target;
    private final String namespace;
    private final int batch;
    private final long sleepMillis;
    private final long slowMillis;
    private final int pid;
    private final Connection book;
    private final Connection work;
    private final AtomicInteger done;

    Worker(Queen queen, String queue, String mode, String target, String namespace, int batch, long sleepMillis,
        long slowMillis, int pid, Connection book, Connection work, AtomicInteger done) {
      this.queen = queen;
      this.queue = queue;
      this.inCallerTx = mode.equals(CONNECTION);
      this.target = target;
      this.namespace = namespace;
      this.batch = batch;
      this.sleepMillis = sleepMillis;
      this.slowMillis = slowMillis;
      this.pid = pid;
      this.book = book;
      this.work = work;
      this.done = done;
    }

    void run() {
      while (true) {
        try {
          List<Message> got = queen.queue(queue).consumer().batch(batch).waitFor(Duration.ofMillis(200)).pop();
          for (Message m : got) {
            if (!handle(m)) {
              break; // the lease is gone: the rest of the batch comes back to its new holder
            }
          }
        } catch (Exception e) {
          System.out.println("ERROR " + e);
          e.printStackTrace(System.out);
          try {
            work.rollback();
          } catch (SQLException ignored) {
            // the next round finds out
          }
        }
      }
    }

    /** Handles one message; returns whether this worker still holds the lease. */
    private boolean handle(Message m) throws Exception {
      UUID id = m.id();
      int n = m.payload().path("n").asInt(-1);
      long tryId = tried(m);
      boolean fail = m.payload().path("fail").asBoolean(false) && firstTime("fail", id);
      boolean slow = m.payload().path("slow").asBoolean(false) && firstTime("slow", id);
      long pause = sleepMillis + (slow ? slowMillis : 0);

      Transaction tx = queen.transaction().once(namespace, "msg:" + id, MARKER);
      CommitResult res;
      try {
        if (!inCallerTx) {
          tx.push(target, m.partition(), Map.of("messageId", id.toString(), "n", n, "pid", pid, "tryId", tryId)).ack(m);
          Thread.sleep(pause); // "the work": a kill here leaves nothing
          if (fail) {
            throw new HandlerFailure("the handler failed before commit(); nothing was sent");
          }
          res = tx.commit();
        } else {
          try (PreparedStatement st = work.prepareStatement(
              "insert into " + target + "(message_id, n, pid, try_id) values (?, ?, ?, ?)")) {
            st.setObject(1, id);
            st.setInt(2, n);
            st.setInt(3, pid);
            st.setLong(4, tryId);
            st.executeUpdate();
          }
          Thread.sleep(pause / 2); // between the effect and the bundle
          res = tx.ack(m).commit(work);
          if (fail) {
            // the bundle was applied on our connection (the marker is written there), and the handler fails
            // before the caller's commit: the rollback must take the marker and the ack away with the effect
            throw new HandlerFailure("the handler failed after commit(connection) (success=" + res.success()
                + ") and before the caller's commit");
          }
          Thread.sleep(pause - pause / 2); // between the bundle and the caller's commit
          if (res.success()) {
            work.commit();
          } else {
            work.rollback(); // the effect row goes; nothing of the bundle was applied either
          }
        }
      } catch (HandlerFailure e) {
        work.rollback();
        outcome(tryId, "FAILED");
        AckResult ack = queen.ack(m, AckStatus.FAILED, e.getMessage());
        System.out.println("FAILED " + id + " ack=" + ack.outcome() + ": " + e.getMessage());
        return false; // a failed head releases the lease
      }

      if (res.success()) {
        outcome(tryId, "COMMITTED");
        System.out.println("DONE " + done.incrementAndGet() + " " + id);
        return true;
      }
      if (res.reason() == CommitResult.Reason.KV_PRECONDITION) {
        // somebody already did this work, and nothing of the bundle was committed: the ack rolled back with
        // the marker, so the message is still on the group's cursor. Take it off separately.
        outcome(tryId, "PRECONDITION");
        AckResult ack = queen.ack(m);
        String how = ack.outcome().name(); // ACKED, or ALREADY_ACKED / LEASE_LOST for a zombie
        outcome(tryId, "PRECONDITION_" + how);
        System.out.println("PRECONDITION " + id + " value=" + res.value() + " version=" + res.version()
            + " failedOperation=" + res.failedOperation() + " ack=" + ack.outcome());
        return ack.success();
      }
      outcome(tryId, res.reason().name());
      System.out.println(res.reason() + " " + id + " attempt=" + m.attempt());
      return false;
    }

    private long tried(Message m) throws SQLException {
      return OnceConsumerChild.tried(book, m, pid);
    }

    private void outcome(long tryId, String outcome) throws SQLException {
      OnceConsumerChild.outcome(book, tryId, outcome);
    }

    private boolean firstTime(String kind, UUID id) throws SQLException {
      return OnceConsumerChild.firstTime(book, kind, id);
    }
  }

  private static long tried(Connection book, Message m, int pid) throws SQLException {
    try (PreparedStatement st = book.prepareStatement(
        "insert into tried(message_id, pid, attempt) values (?, ?, ?) returning id")) {
      st.setObject(1, m.id());
      st.setInt(2, pid);
      st.setInt(3, m.attempt());
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  private static void outcome(Connection book, long tryId, String outcome) throws SQLException {
    try (PreparedStatement st = book.prepareStatement("update tried set outcome = ? where id = ?")) {
      st.setString(1, outcome);
      st.setLong(2, tryId);
      st.executeUpdate();
    }
  }

  /** True the first time any child asks about (kind, id). */
  private static boolean firstTime(Connection book, String kind, UUID id) throws SQLException {
    try (PreparedStatement st = book.prepareStatement(
        "insert into first_time(kind, message_id) values (?, ?) on conflict do nothing")) {
      st.setString(1, kind);
      st.setObject(2, id);
      return st.executeUpdate() == 1;
    }
  }
}
