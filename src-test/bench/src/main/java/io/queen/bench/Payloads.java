package io.queen.bench;

import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * JSON payloads of exactly {@value #SIZE} bytes (ASCII), made once up front so that producing them costs neither side of a
 * comparison anything. Queen and the raw baseline pick from the same array.
 */
final class Payloads {
  static final int SIZE = 200;

  private final String[] texts;

  Payloads(int count, long seed) {
    SplittableRandom random = new SplittableRandom(seed);
    texts = new String[count];
    for (int i = 0; i < count; i++) {
      String head = String.format(Locale.ROOT,
          "{\"orderId\":%d,\"customer\":\"customer-%05d\",\"currency\":\"EUR\",\"amount\":%d.%02d,"
              + "\"items\":[{\"sku\":\"SKU-%06d\",\"qty\":%d},{\"sku\":\"SKU-%06d\",\"qty\":%d}],\"note\":\"",
          1_000_000 + i, random.nextInt(100_000), random.nextInt(10_000), random.nextInt(100), random.nextInt(1_000_000),
          1 + random.nextInt(9), random.nextInt(1_000_000), 1 + random.nextInt(9));
      texts[i] = pad(head, random);
    }
  }

  String get(int i) {
    return texts[Math.floorMod(i, texts.length)];
  }

  int count() {
    return texts.length;
  }

  /** A payload carrying a sequence number and a {@link System#nanoTime()} stamp, padded to {@value #SIZE} bytes. */
  static String stamped(long seq, long nanoTime) {
    String head = "{\"seq\":" + seq + ",\"t\":" + nanoTime + ",\"note\":\"";
    char[] pad = new char[SIZE - head.length() - 2];
    Arrays.fill(pad, 'x');
    return head + new String(pad) + "\"}";
  }

  private static String pad(String head, SplittableRandom random) {
    StringBuilder b = new StringBuilder(SIZE).append(head);
    while (b.length() < SIZE - 2) {
      b.append((char) ('a' + random.nextInt(26)));
    }
    return b.append("\"}").toString();
  }
}
