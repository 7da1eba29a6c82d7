package io.queen.pgconn.internal.source;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Decodes one pgoutput message (protocol version 1, text tuples) into a {@link PgMessage}, following
 * PostgreSQL's "Logical Replication Message Formats": big-endian integers, NUL-terminated UTF-8
 * strings, times in microseconds since 2000-01-01 shifted to the Unix epoch, LSNs and xids unsigned.
 *
 * <p>Only what protocol 1 with {@code binary} and {@code streaming} off can send is accepted: the tags
 * {@code B C O R Y I U D T M}. Any other tag (streamed transactions {@code S E c A}, two-phase {@code b P K r p}
 * and the rest) and a binary tuple value ({@code b}) are an {@link IllegalStateException} naming what arrived,
 * never skipped: they mean the stream was started with options the source does not use. An empty schema on
 * {@code R} and {@code Y} (PostgreSQL's way to say {@code pg_catalog}) is given as {@code pg_catalog}.
 *
 * <p>Stateless and thread-safe. The buffer is read from its position to its limit through a duplicate, so the
 * caller's position is left as it was; it may wrap a shared array at an offset (pgjdbc's does).
 */
final class PgOutputDecoder {
  /** Microseconds from 1970-01-01 to PostgreSQL's epoch 2000-01-01. */
  static final long PG_EPOCH_OFFSET_MICROS = 946_684_800_000_000L;

  private PgOutputDecoder() {}

  /**
   * Decodes the message between the buffer's position and limit; the whole range must be one message.
   *
   * @throws IllegalStateException for a tag or tuple format protocol 1 with text values never sends, a message
   *     shorter than its layout, or bytes left over after it
   */
  static PgMessage decode(ByteBuffer buf) {
    ByteBuffer b = buf.duplicate().order(ByteOrder.BIG_ENDIAN);
    if (!b.hasRemaining()) {
      throw new IllegalStateException("empty pgoutput message");
    }
    char tag = (char) (b.get() & 0xFF);
    PgMessage m;
    try {
      m = switch (tag) {
        case 'B' -> new PgMessage.Begin(b.getLong(), time(b.getLong()), Integer.toUnsignedLong(b.getInt()));
        case 'C' -> commit(b);
        case 'O' -> new PgMessage.Origin(b.getLong(), string(b));
        case 'R' -> relation(b);
        case 'Y' -> new PgMessage.Type(b.getInt(), schema(string(b)), string(b));
        case 'I' -> insert(b);
        case 'U' -> update(b);
        case 'D' -> delete(b);
        case 'T' -> truncate(b);
        case 'M' -> message(b);
        default -> throw new IllegalStateException("pgoutput message " + tagName(tag) + " is not supported: the"
            + " source reads protocol version 1 with streaming, two_phase and binary off");
      };
    } catch (BufferUnderflowException e) {
      throw new IllegalStateException("pgoutput message '" + tag + "' is shorter than its layout", e);
    }
    if (b.hasRemaining()) {
      throw new IllegalStateException(
          "pgoutput message '" + tag + "' has " + b.remaining() + " bytes after its layout");
    }
    return m;
  }

  private static PgMessage commit(ByteBuffer b) {
    b.get(); // flags, unused (0)
    return new PgMessage.Commit(b.getLong(), b.getLong(), time(b.getLong()));
  }

  private static PgMessage relation(ByteBuffer b) {
    int oid = b.getInt();
    String schema = schema(string(b));
    String name = string(b);
    char identity = (char) (b.get() & 0xFF);
    int n = b.getShort() & 0xFFFF;
    List<PgMessage.Relation.Column> columns = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      boolean key = (b.get() & 1) != 0;
      columns.add(new PgMessage.Relation.Column(key, string(b), b.getInt(), b.getInt()));
    }
    return new PgMessage.Relation(oid, schema, name, identity, List.copyOf(columns));
  }

  private static PgMessage insert(ByteBuffer b) {
    int rel = b.getInt();
    expect(b, 'N', 'I');
    return new PgMessage.Insert(rel, tuple(b));
  }

  private static PgMessage update(ByteBuffer b) {
    int rel = b.getInt();
    char kind = (char) (b.get() & 0xFF);
    PgMessage.Tuple before = null;
    char oldKind = 0;
    if (kind == 'K' || kind == 'O') {
      oldKind = kind;
      before = tuple(b);
      kind = (char) (b.get() & 0xFF);
    }
    if (kind != 'N') {
      throw new IllegalStateException("pgoutput message 'U' has tuple marker " + describe(kind) + " where 'N' belongs");
    }
    return new PgMessage.Update(rel, oldKind, before, tuple(b));
  }

  private static PgMessage delete(ByteBuffer b) {
    int rel = b.getInt();
    char kind = (char) (b.get() & 0xFF);
    if (kind != 'K' && kind != 'O') {
      throw new IllegalStateException(
          "pgoutput message 'D' has tuple marker " + describe(kind) + " where 'K' or 'O' belongs");
    }
    return new PgMessage.Delete(rel, kind, tuple(b));
  }

  private static PgMessage truncate(ByteBuffer b) {
    int n = b.getInt();
    if (n < 0) {
      throw new IllegalStateException("pgoutput message 'T' names " + Integer.toUnsignedString(n) + " relations");
    }
    int options = b.get() & 0xFF;
    List<Integer> oids = new ArrayList<>(Math.min(n, b.remaining() / 4));
    for (int i = 0; i < n; i++) {
      oids.add(b.getInt());
    }
    return new PgMessage.Truncate(List.copyOf(oids), options);
  }

  private static PgMessage message(ByteBuffer b) {
    boolean transactional = (b.get() & 1) != 0;
    long lsn = b.getLong();
    String prefix = string(b);
    int len = b.getInt();
    if (len < 0 || len > b.remaining()) {
      throw new BufferUnderflowException();
    }
    byte[] content = new byte[len];
    b.get(content);
    return new PgMessage.LogicalMessage(transactional, lsn, prefix, content);
  }

  private static PgMessage.Tuple tuple(ByteBuffer b) {
    int n = b.getShort() & 0xFFFF;
    char[] kinds = new char[n];
    String[] texts = new String[n];
    for (int i = 0; i < n; i++) {
      char k = (char) (b.get() & 0xFF);
      switch (k) {
        case 'n', 'u' -> kinds[i] = k;
        case 't' -> {
          int len = b.getInt();
          if (len < 0 || len > b.remaining()) {
            throw new BufferUnderflowException();
          }
          kinds[i] = 't';
          texts[i] = utf8(b, b.position(), len);
          b.position(b.position() + len);
        }
        case 'b' -> throw new IllegalStateException("pgoutput tuple value 'b' (binary) is not supported: the source"
            + " starts the stream with binary off and reads text values");
        default -> throw new IllegalStateException("pgoutput tuple value kind " + describe(k) + " is unknown");
      }
    }
    return new PgMessage.Tuple(kinds, texts);
  }

  private static void expect(ByteBuffer b, char want, char tag) {
    char got = (char) (b.get() & 0xFF);
    if (got != want) {
      throw new IllegalStateException(
          "pgoutput message '" + tag + "' has tuple marker " + describe(got) + " where '" + want + "' belongs");
    }
  }

  /** A NUL-terminated UTF-8 string; the position ends after the NUL. */
  private static String string(ByteBuffer b) {
    int start = b.position();
    int limit = b.limit();
    int end = start;
    while (end < limit && b.get(end) != 0) {
      end++;
    }
    if (end == limit) {
      throw new BufferUnderflowException();
    }
    String s = utf8(b, start, end - start);
    b.position(end + 1);
    return s;
  }

  private static String utf8(ByteBuffer b, int at, int len) {
    if (b.hasArray()) {
      return new String(b.array(), b.arrayOffset() + at, len, StandardCharsets.UTF_8);
    }
    byte[] bytes = new byte[len];
    b.get(at, bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static String schema(String s) {
    return s.isEmpty() ? "pg_catalog" : s;
  }

  private static long time(long pgMicros) {
    return pgMicros + PG_EPOCH_OFFSET_MICROS;
  }

  private static String tagName(char c) {
    String name = switch (c) {
      case 'S' -> " (stream start)";
      case 'E' -> " (stream stop)";
      case 'c' -> " (stream commit)";
      case 'A' -> " (stream abort)";
      case 'b' -> " (begin prepare)";
      case 'P' -> " (prepare)";
      case 'K' -> " (commit prepared)";
      case 'r' -> " (rollback prepared)";
      case 'p' -> " (stream prepare)";
      default -> "";
    };
    return describe(c) + name;
  }

  private static String describe(char c) {
    return c >= 0x20 && c < 0x7F ? "'" + c + "'" : String.format(Locale.ROOT, "0x%02X", (int) c);
  }
}
