package io.queen.examples;

import io.queen.Queen;
import java.util.function.Consumer;

/** The demo's transaction step; filled in when the KV store lands. */
final class OnceDemo {
  private OnceDemo() {}

  static void run(Queen queen, Consumer<String> say) {
    say.accept("(transactions with once() are not built yet)");
  }
}
