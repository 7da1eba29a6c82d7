package io.queen.embedded.internal.log;

import io.queen.embedded.internal.db.Sql;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;

/**
 * Whether a queue has encryption on, as this node last read it, and the errors of a node that lacks a key. Pushes and
 * pops read it; {@link QueueCatalogue} forgets a queue's view when it changes or deletes the queue. Thread-safe.
 */
public final class EncryptionViews {
  /** How long this node trusts its view of a queue's encryption option; push and push_fast check it anyway. */
  private static final long ENCRYPTION_VIEW_NANOS = 5_000_000_000L;

  private final DataSource ds;
  private final String schema;
  private final PayloadCipher cipher;
  /** Whether a queue has encryption on, as this node last read it, until when (System.nanoTime). */
  private final ConcurrentHashMap<String, EncryptionView> views = new ConcurrentHashMap<>();

  private record EncryptionView(boolean on, long until) {}

  EncryptionViews(DataSource ds, String quotedSchema, PayloadCipher cipher) {
    this.ds = ds;
    this.schema = quotedSchema;
    this.cipher = cipher;
  }

  /**
   * Whether the queue has encryption on, from this node's view (read again after 5 s, or after a refusal).
   * {@code operation} names the call in a failure ("push", "pop"): it is that call that failed.
   */
  public boolean encrypted(String queue, String operation) {
    EncryptionView v = views.get(queue);
    if (v != null && v.until - System.nanoTime() > 0) {
      return v.on;
    }
    boolean on = Sql.autoCommit(ds, operation, c -> {
      try (PreparedStatement st = c.prepareStatement("select encryption from " + schema + ".queues where name = ?")) {
        st.setString(1, queue);
        try (ResultSet rs = st.executeQuery()) {
          return rs.next() && rs.getBoolean(1);
        }
      }
    });
    long now = System.nanoTime();
    if (views.size() >= 1024) { // views of queues not used for a while (deleted on another node, say) go
      views.values().removeIf(view -> view.until - now <= 0);
    }
    views.put(queue, new EncryptionView(on, now + ENCRYPTION_VIEW_NANOS));
    return on;
  }

  /** Forgets the view of a queue (its options changed, or it was deleted). */
  void forget(String queue) {
    views.remove(queue);
  }

  /** The queues this node holds a view of. */
  Set<String> queues() {
    return views.keySet();
  }

  int size() {
    return views.size();
  }

  static String noKey(String queue, String what) {
    return "queue '" + queue + "' has encryption on and this node has no encryption key, so it does not " + what
        + " it: start the node with the cluster's key (builder encryptionKey(...) or the environment variable"
        + " QUEEN_ENCRYPTION_KEY, 64 hex digits), or switch the queue's encryption off";
  }

  /** The error for a stored message sealed under a key this node does not hold (ids only, never keys). */
  public String missingKey(String queue, String keyId) {
    return "queue '" + queue + "' holds messages sealed under key id " + keyId + ", which this node does not hold (it"
        + " holds " + (cipher.ids().isEmpty() ? "no key" : "key id(s) " + cipher.ids()) + "): add that key to the"
        + " builder's oldEncryptionKeys(...) (or QUEEN_ENCRYPTION_OLD_KEYS) after a rotation, or start the node with"
        + " the cluster's key";
  }
}
