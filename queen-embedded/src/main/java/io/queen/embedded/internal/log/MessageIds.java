package io.queen.embedded.internal.log;

import io.queen.PushOutcomeUnknownException;
import java.util.Objects;
import java.util.UUID;

/**
 * The message ids Queen generates: version 7 UUIDs numbered in runs, one run per partition of a push, so that one
 * push receipt can stand for a run. Thread-safe.
 */
final class MessageIds {
  /** The last 60-bit time-and-sequence prefix handed out by {@link #timeOrderedUuid} in this JVM. */
  private static final java.util.concurrent.atomic.AtomicLong LAST_ID_PREFIX = new java.util.concurrent.atomic.AtomicLong();

  /** The low bits of a generated id that number the items of one partition in one push (at most 100,000 < 2^17). */
  static final int RANK_BITS = 17;
  private static final long RANK_MASK = (1L << RANK_BITS) - 1;

  /**
   * A version 7 UUID (RFC 9562) to number a run of messages from: 48 bits of Unix time in milliseconds, the version
   * (7), 12 bits of a sequence that makes runs of the same millisecond increase (RFC 9562's "method 1"; it carries
   * into the time field when more than 4096 are made in one millisecond), the variant, 45 random bits from the
   * thread's generator and 17 zero bits. The run's messages take this id + their rank (0, 1, 2, ...) in those low
   * bits. So ids made in this JVM never repeat and increase within a run and from one run to the next, ids of
   * different JVMs are ordered by millisecond, and {@link #anchor} of any id of the run is the run's first id (one
   * compare-and-set per run; no lock shared by pushers). Not secret.
   */
  static UUID timeOrderedUuid() {
    long now = System.currentTimeMillis() << 12;
    long prev;
    long next;
    do {
      prev = LAST_ID_PREFIX.get();
      next = Math.max(now, prev + 1);
    } while (!LAST_ID_PREFIX.compareAndSet(prev, next));
    long msb = ((next >>> 12) << 16) | 0x7000L | (next & 0xfffL);
    long lsb = (java.util.concurrent.ThreadLocalRandom.current().nextLong() & 0x3fffffffffffffffL & ~RANK_MASK)
        | 0x8000000000000000L;
    return new UUID(msb, lsb);
  }

  /** The Unix time in milliseconds in a generated id's first 48 bits (see {@link #timeOrderedUuid}). */
  static long idMillis(UUID id) {
    return id.getMostSignificantBits() >>> 16;
  }

  /** The first id of the run a generated id belongs to (its rank bits cleared). */
  static UUID anchor(UUID id) {
    return new UUID(id.getMostSignificantBits(), id.getLeastSignificantBits() & ~RANK_MASK);
  }

  /** A generated id's rank in its run. */
  static int rank(UUID id) {
    return (int) (id.getLeastSignificantBits() & RANK_MASK);
  }

  /**
   * The id a transaction id names when it has the form of an id Queen generates (a lower-case version 7 UUID), for
   * the receipt look-up of a push of {@link PushOutcomeUnknownException#items()}; {@code null} otherwise.
   */
  static UUID generatedForm(String transactionId) {
    if (transactionId == null || transactionId.length() != 36 || transactionId.charAt(14) != '7') {
      return null;
    }
    try {
      UUID u = UUID.fromString(transactionId);
      return u.variant() == 2 && u.toString().equals(transactionId) ? u : null;
    } catch (IllegalArgumentException e) {
      return null;
    }
  }

  /**
   * The message ids of one push: the items of one partition are one run ({@link #timeOrderedUuid} + their rank), so
   * that one receipt row can stand for all of them.
   */
  static final class Runs {
    private String lastQueue;
    private String lastPartition;
    private long[] lastRun; // the run's first id (msb, lsb) and the next rank
    private java.util.Map<String, long[]> byPair; // only once a second partition appears

    UUID next(String queue, String partition) {
      if (lastRun == null || !queue.equals(lastQueue) || !Objects.equals(partition, lastPartition)) {
        if (lastRun != null && byPair == null) {
          byPair = new java.util.HashMap<>();
          byPair.put(lastQueue + '\u0000' + lastPartition, lastRun);
        }
        long[] run = byPair == null ? null : byPair.get(queue + '\u0000' + partition);
        if (run == null) {
          UUID first = timeOrderedUuid();
          run = new long[] {first.getMostSignificantBits(), first.getLeastSignificantBits(), 0};
          if (byPair != null) {
            byPair.put(queue + '\u0000' + partition, run);
          }
        }
        lastRun = run;
        lastQueue = queue;
        lastPartition = partition;
      }
      return new UUID(lastRun[0], lastRun[1] | lastRun[2]++);
    }
  }

  private MessageIds() {}
}
