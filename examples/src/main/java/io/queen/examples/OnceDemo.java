package io.queen.examples;

import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The demo's transaction step: a payment is taken once. The marker, the receipt push and the ack
 * commit together; a redelivery of the same payment finds the marker and commits nothing.
 */
final class OnceDemo {
  private OnceDemo() {}

  static void run(Queen queen, Consumer<String> say) {
    queen.queue("payments").partition("order-42").push(Map.of("order", 42, "amount", 99));
    Message first = queen.queue("payments").consumer().pop().get(0);
    CommitResult ok = queen.transaction()
        .once("charges", "charge:42", Kv.ttl(Duration.ofDays(1)).required())
        .push("receipts", "order-42", Map.of("order", 42, "charged", 99))
        .ack(first)
        .commit();
    say.accept("payment 42: once() + push receipt + ack committed together: success=" + ok.success());

    // the same payment arrives again (say the producer retried): the marker stops it
    queen.queue("payments").partition("order-42").push(Map.of("order", 42, "amount", 99));
    Message again = queen.queue("payments").consumer().pop().get(0);
    CommitResult dup = queen.transaction()
        .once("charges", "charge:42", Kv.ttl(Duration.ofDays(1)).required())
        .push("receipts", "order-42", Map.of("order", 42, "charged", 99))
        .ack(again)
        .commit();
    say.accept("payment 42 again: success=" + dup.success() + " reason=" + dup.reason()
        + " (nothing of the bundle committed, so the duplicate is acked on its own)");
    queen.ack(again);
    List<Message> receipts = queen.queue("receipts").consumer().batch(10).pop();
    say.accept("receipts queued: " + receipts.size() + " (exactly one)");
    queen.ack(receipts);
  }
}
