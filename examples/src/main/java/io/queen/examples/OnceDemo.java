package io.queen.examples;

import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import io.queen.Subscription;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The demo's transaction step: a payment is taken once, by the consume loop. The handler adds an
 * idempotency marker and the receipt to the loop's transaction; the loop adds the ack and commits all
 * three together. The same payment pushed twice (a producer that retried) is charged once: the second
 * delivery finds the marker, nothing of its bundle commits, and the loop acknowledges it as already done.
 */
final class OnceDemo {
  private OnceDemo() {}

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  static void run(Queen queen, Consumer<String> say) {
    queen.queue("payments").partition("order-42").push(Map.of("order", 42, "amount", 99));
    queen.queue("payments").partition("order-42").push(Map.of("order", 42, "amount", 99)); // the producer retried

    try (Subscription payments = queen.queue("payments").consumer().consumeInTransaction((m, tx) -> tx
        .once("charges", "charge:" + m.payload().get("order").asInt(), Kv.ttl(Duration.ofDays(1)).required())
        .push("receipts", m.partition(), Map.of("order", m.payload().get("order").asInt(), "charged", 99)))) {
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (payments.acked() + payments.alreadyDone() < 2) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the payments consumer did not finish in 30 s");
        }
        sleep(20);
      }
      say.accept("payment 42 delivered twice: committed " + payments.acked() + " (marker + receipt + ack in one"
          + " transaction), already done " + payments.alreadyDone() + " (its marker was there: nothing committed, acked)");
    }
    List<Message> receipts = queen.queue("receipts").consumer().batch(10).pop();
    say.accept("receipts queued: " + receipts.size() + " (exactly one)");
    queen.ack(receipts);
  }
}
