package io.queen.bench;

import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * Runs N worker threads (a fixed, named pool) that each repeat one unit of work, and measures messages completed per second
 * over a window that starts after a warm-up. The window is read from a shared counter by the controlling thread every
 * millisecond, so its edges are exact to about one millisecond and one unit of work per thread.
 *
 * <p>Not thread-safe; one run at a time.
 */
final class ThroughputRunner {

  /** One thread's work. Opened on its thread, closed on its thread. */
  interface Worker extends AutoCloseable {
    /** Does one unit of work; returns the messages it completed (0 is fine), or -1 when there is no more work. */
    int step() throws Exception;

    @Override
    default void close() throws SQLException {}
  }

  @FunctionalInterface
  interface WorkerFactory {
    Worker open(int index) throws Exception;
  }

  /**
   * When the measured window starts and ends.
   *
   * @param warmupNanos the window starts no earlier than this after the workers start
   * @param warmupMessages ... and no earlier than when this many messages are done
   * @param maxWindowNanos the window ends after this long at most
   * @param endMessages ... or as soon as this many messages are done in total (counted from the start, warm-up included)
   * @param giveUpNanos fail when the window has not started after this long
   */
  record Window(long warmupNanos, long warmupMessages, long maxWindowNanos, long endMessages, long giveUpNanos) {
    /** Fixed-time warm-up, then a fixed-time window. */
    static Window timed(Duration warmup, Duration window) {
      return new Window(warmup.toNanos(), 0, window.toNanos(), Long.MAX_VALUE, warmup.toNanos() + Duration.ofMinutes(1).toNanos());
    }

    /** For draining a backlog: the window runs from {@code startAt} to {@code endAt} messages done, or {@code maxWindow}. */
    static Window between(long startAt, long endAt, Duration maxWindow, Duration giveUp) {
      return new Window(0, startAt, maxWindow.toNanos(), endAt, giveUp.toNanos());
    }
  }

  /**
   * What a run measured.
   *
   * @param messages messages done inside the window
   * @param nanos the window's length
   * @param total messages done by the workers from start to stop (warm-up and tail included)
   */
  record Result(long messages, long nanos, long total) {
    double perSecond() {
      return nanos == 0 ? 0 : messages * 1e9 / nanos;
    }

    double seconds() {
      return nanos / 1e9;
    }

    /** Two runs' messages and times added, as one longer window. */
    Result plus(Result other) {
      return new Result(messages + other.messages, nanos + other.nanos, total + other.total);
    }
  }

  private ThroughputRunner() {}

  static Result run(String name, int threads, WorkerFactory factory, Window window) throws Exception {
    AtomicLong done = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    AtomicInteger running = new AtomicInteger(threads);
    CountDownLatch ready = new CountDownLatch(threads);
    CountDownLatch go = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads, named("bench-" + name));
    List<Future<?>> futures = new ArrayList<>();
    try {
      for (int i = 0; i < threads; i++) {
        int index = i;
        futures.add(pool.submit(() -> {
          Worker worker = null;
          try {
            try {
              worker = factory.open(index);
            } finally {
              ready.countDown();
            }
            go.await();
            while (!stop.get()) {
              int n = worker.step();
              if (n < 0) {
                break;
              }
              done.addAndGet(n);
            }
          } catch (Throwable t) {
            failure.compareAndSet(null, t);
            stop.set(true);
          } finally {
            running.decrementAndGet();
            if (worker != null) {
              try {
                worker.close();
              } catch (Exception e) {
                failure.compareAndSet(null, e);
              }
            }
          }
          return null;
        }));
      }
      ready.await();
      throwIfFailed(name, failure);
      long t0 = System.nanoTime();
      go.countDown();
      long startT = -1;
      long startC = 0;
      long endT;
      long endC;
      while (true) {
        LockSupport.parkNanos(1_000_000);
        long now = System.nanoTime();
        long c = done.get();
        throwIfFailed(name, failure);
        boolean allDone = running.get() == 0;
        if (startT < 0) {
          if (now - t0 >= window.warmupNanos() && c >= window.warmupMessages()) {
            startT = now;
            startC = c;
          } else if (allDone || now - t0 > window.giveUpNanos()) {
            throw new IllegalStateException(name + ": the measured window never started: " + c + " messages done in "
                + (now - t0) / 1_000_000 + " ms, needed " + window.warmupMessages()
                + (allDone ? " (the workers ran out of work)" : ""));
          }
        } else if (now - startT >= window.maxWindowNanos() || c >= window.endMessages() || allDone) {
          endT = now;
          endC = c;
          break;
        }
      }
      stop.set(true);
      for (Future<?> f : futures) {
        f.get(60, TimeUnit.SECONDS);
      }
      throwIfFailed(name, failure);
      return new Result(endC - startC, endT - startT, done.get());
    } finally {
      stop.set(true);
      go.countDown();
      shutdown(pool, name);
    }
  }

  private static void throwIfFailed(String name, AtomicReference<Throwable> failure) throws Exception {
    Throwable t = failure.get();
    if (t != null) {
      throw new IllegalStateException(name + ": a worker failed: " + t, t);
    }
  }

  /** Shuts a pool down in two bounded steps, as db-scheduler's ExecutorUtils does. */
  static void shutdown(ExecutorService pool, String name) {
    pool.shutdown();
    try {
      if (!pool.awaitTermination(30, TimeUnit.SECONDS)) {
        pool.shutdownNow();
        if (!pool.awaitTermination(10, TimeUnit.SECONDS)) {
          System.err.println("WARN: threads of pool bench-" + name + " are still running");
        }
      }
    } catch (InterruptedException e) {
      pool.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  /** Daemon threads named {@code <prefix>-<n>} (daemon so a stuck benchmark thread cannot keep the JVM alive). */
  static ThreadFactory named(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }
}
