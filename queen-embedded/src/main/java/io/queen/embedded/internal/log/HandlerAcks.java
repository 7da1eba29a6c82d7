package io.queen.embedded.internal.log;

import io.queen.Message;
import java.util.Collection;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

/**
 * The messages a consume loop's handler acknowledged itself, in a bundle it committed on the loop's worker thread
 * ({@code queen.transaction().ack(msg).commit(connection)} inside the application's own transaction, say): the loop
 * does not acknowledge those a second time. Kept per thread, for the duration of one handler call; a bundle
 * committed on another thread is not seen, and the loop's second ack of it then answers {@code ALREADY_ACKED}.
 */
public final class HandlerAcks {

  private static final ThreadLocal<Set<Message>> CALL = new ThreadLocal<>();

  private HandlerAcks() {}

  /** A handler call starts on this thread. */
  public static void begin() {
    CALL.set(Collections.newSetFromMap(new IdentityHashMap<>()));
  }

  /** The handler call on this thread ended: the messages its committed bundles acknowledged. */
  public static Set<Message> end() {
    Set<Message> acked = CALL.get();
    CALL.remove();
    return acked == null ? Set.of() : acked;
  }

  /** A bundle that acknowledged {@code messages} committed (or joined the caller's transaction) on this thread. */
  public static void committed(Collection<Message> messages) {
    Set<Message> acked = CALL.get();
    if (acked != null && !messages.isEmpty()) {
      acked.addAll(messages);
    }
  }
}
