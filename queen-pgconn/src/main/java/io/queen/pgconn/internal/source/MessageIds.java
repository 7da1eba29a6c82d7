package io.queen.pgconn.internal.source;

import java.security.SecureRandom;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * The message ids of the source, used as the push's transactionId so a resend is
 * a duplicate, never a second message: {@code pg:<epoch>:<commit LSN, 16 hex>:<seq>} for a change ({@code .1}
 * added for a key change's second event), {@code pg:<epoch>:s:<position>:<seq>} for a snapshot row and
 * {@code pg:<epoch>:s:<position>:f<seq>} for a fill, the position in decimal. The epoch (8 lower-case hex
 * digits) is new for every snapshot, so ids never repeat across a resync. Stateless and thread-safe.
 */
final class MessageIds {
  private static final Pattern EPOCH = Pattern.compile("[0-9a-f]{8}");
  private static final SecureRandom RANDOM = new SecureRandom();

  private MessageIds() {}

  /** A fresh random epoch: 8 lower-case hex digits ({@code 00c0b669}). */
  static String newEpoch() {
    return String.format(Locale.ROOT, "%08x", RANDOM.nextInt());
  }

  /** {@code pg:<epoch>:<commit LSN, 16 hex>:<seq>}: change {@code seq} (0-based) of the transaction. */
  static String change(String epoch, long commitLsn, int seq) {
    return "pg:" + epoch(epoch) + ":" + PgLsn.hex16(commitLsn) + ":" + seq(seq);
  }

  /** The second event of a key change that moved the row to another partition: {@link #change} + {@code .1}. */
  static String changeSecond(String epoch, long commitLsn, int seq) {
    return change(epoch, commitLsn, seq) + ".1";
  }

  /** {@code pg:<epoch>:s:<position>:<seq>}: a row the snapshot read. */
  static String snapshot(String epoch, long position, int seq) {
    return "pg:" + epoch(epoch) + ":s:" + position(position) + ":" + seq(seq);
  }

  /** {@code pg:<epoch>:s:<position>:f<seq>}: a fill event at the end of a snapshot chunk. */
  static String fill(String epoch, long position, int seq) {
    return "pg:" + epoch(epoch) + ":s:" + position(position) + ":f" + seq(seq);
  }

  private static String epoch(String epoch) {
    if (epoch == null || !EPOCH.matcher(epoch).matches()) {
      throw new IllegalArgumentException("epoch must be 8 lower-case hex digits");
    }
    return epoch;
  }

  private static int seq(int seq) {
    if (seq < 0) {
      throw new IllegalArgumentException("seq must be at least 0, got " + seq);
    }
    return seq;
  }

  private static long position(long position) {
    if (position < 0) {
      throw new IllegalArgumentException("position must be at least 0, got " + position);
    }
    return position;
  }
}
