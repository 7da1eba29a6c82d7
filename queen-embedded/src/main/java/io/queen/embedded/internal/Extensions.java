package io.queen.embedded.internal;

import io.queen.Kv;
import io.queen.Transaction;

/** Wires the KV store, the transaction bundle and the janitor into a node. */
final class Extensions {
  private Extensions() {}

  static Kv kv(QueenImpl q) {
    return null;
  }

  static Transaction transaction(QueenImpl q) {
    throw new UnsupportedOperationException("transactions are not wired yet");
  }

  static void startJanitor(QueenImpl q) {}
}
