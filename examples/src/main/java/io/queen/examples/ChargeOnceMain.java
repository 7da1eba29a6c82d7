package io.queen.examples;

import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * "Charge a card once": the idempotency marker, the charge row and the ack commit together or not at
 * all, while consumers crash and messages come back.
 *
 * <p>Each order message is handled in the application's own JDBC transaction: insert the charge row,
 * then a Queen bundle on the same connection ({@code commit(connection)}) with a required
 * {@code putIfAbsent} marker and the ack. If the marker is already there, nothing of the bundle is
 * applied (the ack neither), so the handler rolls back its own row and takes the message off the cursor
 * with a separate ack; the winner's charge id comes back in the result.
 *
 * <p>What this does <em>not</em> give: exactly-once for the card network. A crash between the external
 * call and the commit repeats the call on redelivery; the output counts those calls so you can see it.
 * The database ends with exactly one marker and one charge row per order, and an empty queue.
 *
 * <p>Runs against {@code QUEEN_JDBC_URL} when set, else an embedded PostgreSQL 17.
 */
public final class ChargeOnceMain {
  private static final int ORDERS = 30;
  private static final String QUEUE = "payments";
  private static final String MARKERS = "charges";

  private ChargeOnceMain() {}

  public static void main(String[] args) throws Exception {
    try (Example db = Example.database("charge_once");
        Queen queen = EmbeddedQueen.builder().dataSource(db.dataSource()).nodeId("charge-once").start()) {
      say("Queen started on " + db.description());
      run(queen, db.dataSource(), ChargeOnceMain::say);
    }
  }

  /** The whole example on a started node and its DataSource; reports through {@code say}. */
  public static void run(Queen queen, DataSource ds, Consumer<String> say) throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("create table if not exists charges (order_id int not null, charge_id text not null,"
          + " charged_at timestamptz not null default now())");
    }
    // short leases, so a crashed consumer's message comes back quickly; never dead-letter in the demo
    queen.queue(QUEUE).configure(c -> c.leaseTime(Duration.ofMillis(500)).retryLimit(1000));
    List<PushItem> orders = new ArrayList<>();
    for (int i = 1; i <= ORDERS; i++) {
      orders.add(PushItem.of("customer-" + (i % 4), Map.of("order", i, "amount", 10 * i)));
    }
    // a producer that retried with a fresh transaction id: order 3 arrives twice
    orders.add(PushItem.of("customer-3", Map.of("order", 3, "amount", 30)));
    queen.queue(QUEUE).push(orders);
    say.accept("pushed " + orders.size() + " messages for " + ORDERS + " orders (order 3 twice)");

    Gateway gateway = new Gateway();
    AtomicInteger crashes = new AtomicInteger();
    AtomicInteger alreadyDone = new AtomicInteger();
    AtomicBoolean stop = new AtomicBoolean();
    ExecutorService workers = Executors.newFixedThreadPool(3);
    List<Future<?>> running = new ArrayList<>();
    for (int w = 0; w < 3; w++) {
      running.add(workers.submit(() -> {
        while (!stop.get()) {
          for (Message m : queen.queue(QUEUE).consumer().waitFor(Duration.ofMillis(200)).pop()) {
            handle(queen, ds, m, gateway, crashes, alreadyDone, say);
          }
        }
        return null;
      }));
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (count(ds, "select count(distinct order_id) from charges") < ORDERS || pending(queen) > 0) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the example did not settle in 60 s");
      }
      Thread.sleep(200);
    }
    stop.set(true);
    for (Future<?> f : running) {
      f.get(30, TimeUnit.SECONDS);
    }
    workers.shutdown();

    long rows = count(ds, "select count(*) from charges");
    long markers = queen.kv().getMany(MARKERS, keys()).stream().filter(e -> e.found()).count();
    say.accept("consumer crashes simulated: " + crashes.get() + "; redeliveries of finished work answered by the"
        + " marker: " + alreadyDone.get());
    say.accept("card network calls: " + gateway.calls() + " for " + ORDERS + " orders (a crash between the call and"
        + " the commit repeats the call: the guarantee stops at PostgreSQL)");
    say.accept("charge rows: " + rows + ", markers: " + markers + ", orders: " + ORDERS);
    if (rows != ORDERS || markers != ORDERS) {
      throw new IllegalStateException("expected exactly one charge row and one marker per order");
    }
    say.accept("exactly one marker and one charge row per order; the queue is empty");
  }

  private static void handle(Queen queen, DataSource ds, Message m, Gateway gateway, AtomicInteger crashes,
      AtomicInteger alreadyDone, Consumer<String> say) throws SQLException {
    int order = m.payload().get("order").asInt();
    int dice = ThreadLocalRandom.current().nextInt(8);
    if (dice == 0) {
      crashes.incrementAndGet(); // dies before doing anything: the lease expires, the message comes back
      return;
    }
    String chargeId = gateway.charge(order); // the external effect
    if (dice == 1) {
      crashes.incrementAndGet(); // dies after charging, before the commit: the charge will repeat
      return;
    }
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      try {
        try (PreparedStatement st = c.prepareStatement("insert into charges(order_id, charge_id) values (?, ?)")) {
          st.setInt(1, order);
          st.setString(2, chargeId);
          st.executeUpdate();
        }
        CommitResult res = queen.transaction()
            .putIfAbsent(MARKERS, "charge:" + order, Map.of("chargeId", chargeId), Kv.ttl(Duration.ofDays(1)).required())
            .ack(m)
            .commit(c);
        if (res.success()) {
          c.commit();
        } else {
          c.rollback(); // our charge row goes; nothing of the bundle was applied either
          if (res.reason() == CommitResult.Reason.KV_PRECONDITION) {
            alreadyDone.incrementAndGet();
            queen.ack(m); // the work was done by someone else: take the message off the cursor
            say.accept("order " + order + " was already charged as " + res.value().get("chargeId").asText()
                + " (this attempt's " + chargeId + " would be refunded)");
          }
          // LEASE_LOST: another consumer owns the message now and will finish it; ALREADY_ACKED: another consumer
          // has finished it already (this one was paused past its lease). Either way our charge row is rolled back.
        }
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      } finally {
        c.setAutoCommit(true);
      }
    }
  }

  private static List<String> keys() {
    List<String> keys = new ArrayList<>();
    for (int i = 1; i <= ORDERS; i++) {
      keys.add("charge:" + i);
    }
    return keys;
  }

  /** Messages of the queue's default group not yet done, counted without taking leases. */
  private static long pending(Queen queen) {
    return queen.status().queues().stream().filter(q -> q.name().equals(QUEUE))
        .flatMap(q -> q.groups().stream()).mapToLong(g -> g.lag()).sum();
  }

  private static long count(DataSource ds, String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /** A simulated card network: every call charges, whatever happened before. */
  private static final class Gateway {
    private final Map<Integer, AtomicInteger> calls = new ConcurrentHashMap<>();

    String charge(int order) {
      int n = calls.computeIfAbsent(order, k -> new AtomicInteger()).incrementAndGet();
      return "ch_" + order + "_" + n;
    }

    int calls() {
      return calls.values().stream().mapToInt(AtomicInteger::get).sum();
    }
  }

  static void say(String line) {
    System.out.println("[charge-once] " + line);
  }
}
