package io.queen.embedded.internal.consume;

import io.queen.QueenDatabaseException;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

/**
 * A call the consume loop must not give up on while the database has trouble that passes (a lost connection, a full
 * disk, no free connection: a transient {@link QueenDatabaseException}): it is tried again, 100 ms doubling to 1 s
 * apart, for up to a patience (the lease time: the leases stay renewed meanwhile, and one left to expire on a live
 * node counts an attempt). Anything else, the patience spent, or the subscription closing ends it with the failure.
 */
final class Patiently {
  private Patiently() {}

  /**
   * @param going whether to keep trying (false once the subscription closes)
   * @param firstFailure told of the first failure that will be tried again (a WARN)
   * @param doneAfter told how many tries it took, when more than one (an INFO)
   */
  static <T> T call(Duration patience, BooleanSupplier going, Consumer<RuntimeException> firstFailure,
      IntConsumer doneAfter, Supplier<T> call) {
    long deadline = System.nanoTime() + patience.toNanos();
    long pause = 100;
    for (int tries = 1; ; tries++) {
      try {
        T result = call.get();
        if (tries > 1) {
          doneAfter.accept(tries);
        }
        return result;
      } catch (RuntimeException e) {
        if (!(e instanceof QueenDatabaseException q && q.isTransient()) || !going.getAsBoolean()
            || System.nanoTime() + pause * 1_000_000L >= deadline) {
          throw e;
        }
        if (tries == 1) {
          firstFailure.accept(e);
        }
        try {
          Thread.sleep(pause);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw e;
        }
        pause = Math.min(1_000, pause * 2);
      }
    }
  }
}
