package io.queen.embedded.internal.log;

import io.queen.EncryptionException;
import io.queen.embedded.internal.db.Sql;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The cluster's keys: the ids of the keys its nodes may seal payloads with, in the table {@code encryption_keys} (ids
 * only; a key never leaves the node). A node whose current key is not listed refuses to start while the table lists
 * any key, and refuses to seal a push while its key is not listed (the cluster has adopted no key yet, or its key was
 * removed from the list since it started). A key is listed only by a node started with {@code adoptEncryptionKey()}:
 * the first key of a cluster, or the next key of a rotation, which that node must prove by holding a listed key too
 * (as one of its {@code oldEncryptionKeys}). Adoptions are serialised by a lock on the table, so two nodes adopting
 * different first keys at once cannot both succeed.
 */
public final class KeyRegistry {
  private static final Logger LOG = LoggerFactory.getLogger(KeyRegistry.class);
  /** How long a node trusts that its key is listed before it reads the list again (on its next sealed push). */
  private static final long VIEW_NANOS = 5_000_000_000L;

  private final DataSource ds;
  private final String schema;
  private final PayloadCipher cipher;
  private final String node;
  /** System.nanoTime() until which this node's current key is known to be listed; 0 while not known. */
  private volatile long listedUntil;

  /**
   * @param quotedSchema the schema, quoted
   */
  public KeyRegistry(DataSource ds, String quotedSchema, PayloadCipher cipher, String node) {
    this.ds = ds;
    this.schema = quotedSchema;
    this.cipher = cipher;
    this.node = node;
  }

  /**
   * Checks this node's current key against the cluster's list when the node starts, and lists it when
   * {@code adopt} allows.
   *
   * @throws EncryptionException when the key is not listed and the list is not empty (without {@code adopt}), or
   *     when {@code adopt} asks to add a key to a list none of whose keys this node holds; nothing is changed then
   */
  public void onStart(boolean adopt) {
    if (!cipher.canSeal()) {
      return; // no key: encrypted queues refuse this node's pushes and pops anyway
    }
    String id = cipher.currentId();
    boolean isListed = Sql.inTransaction(ds, "encryption keys", c -> {
      List<String> listed = listed(c, false);
      if (listed.contains(id)) {
        return true;
      }
      if (!adopt) {
        if (listed.isEmpty()) {
          LOG.info("{} - this cluster has adopted no encryption key yet: pushes to encrypted queues are refused"
              + " until a node started with adoptEncryptionKey() adopts one (this node's key id is {})", node, id);
          return false;
        }
        throw new EncryptionException(notListed(id, listed) + "; this node was not started");
      }
      listed = listed(c, true); // again, under the lock that serialises adoptions
      if (listed.contains(id)) {
        return true;
      }
      if (!listed.isEmpty() && cipher.ids().stream().noneMatch(listed::contains)) {
        throw new EncryptionException("adoptEncryptionKey(): this node's key id " + id + " would join the cluster's"
            + " keys (ids " + listed + "), but this node holds none of them (its key ids " + cipher.ids() + "): a"
            + " new key is adopted by a node that also holds a key of the cluster in oldEncryptionKeys(...), so"
            + " that it can read what the cluster has sealed. Nothing was adopted and this node was not started");
      }
      try (PreparedStatement st = c.prepareStatement("insert into " + schema
          + ".encryption_keys(key_id, adopted_by) values (?, ?)")) {
        st.setString(1, id);
        st.setString(2, node);
        st.executeUpdate();
      }
      LOG.info("{} - adopted encryption key id {} for this cluster (its keys before: {})", node, id,
          listed.isEmpty() ? "none" : listed);
      return true;
    });
    if (isListed) {
      listedUntil = System.nanoTime() + VIEW_NANOS;
    }
  }

  /**
   * Refuses to seal a push to {@code queue} while this node's current key is not one of the cluster's (read again
   * at most every 5 s while it is).
   *
   * @throws EncryptionException naming the key ids; nothing was pushed
   */
  void requireListed(String queue) {
    long until = listedUntil;
    if (until != 0 && until - System.nanoTime() > 0) {
      return;
    }
    String id = cipher.currentId();
    List<String> listed = Sql.autoCommit(ds, "encryption keys", c -> listed(c, false));
    if (!listed.contains(id)) {
      listedUntil = 0;
      throw new EncryptionException(queue, "queue '" + queue + "' has encryption on and "
          + (listed.isEmpty() ? "this cluster has adopted no encryption key yet (this node's key id is " + id
              + "): start one node with adoptEncryptionKey() to adopt its key"
              : notListed(id, listed)) + "; nothing was pushed");
    }
    listedUntil = System.nanoTime() + VIEW_NANOS;
  }

  private String notListed(String id, List<String> listed) {
    return "this node's encryption key has id " + id + ", which is not one of this cluster's keys (ids " + listed
        + "; this node holds " + cipher.ids() + "): start it with the cluster's key (builder encryptionKey(...) or"
        + " QUEEN_ENCRYPTION_KEY); to move the cluster to this key, start a node with it, with a key of the cluster"
        + " in oldEncryptionKeys(...) and with adoptEncryptionKey() (docs/encryption.md, \"Rotating the key\")";
  }

  /** The listed key ids in order; {@code lock}: first take the lock that serialises adoptions. */
  private List<String> listed(Connection c, boolean lock) throws SQLException {
    if (lock) {
      try (PreparedStatement st = c.prepareStatement("lock table " + schema
          + ".encryption_keys in share row exclusive mode")) {
        st.execute();
      }
    }
    List<String> out = new ArrayList<>();
    try (PreparedStatement st = c.prepareStatement("select key_id from " + schema
        + ".encryption_keys order by adopted_at, key_id"); ResultSet rs = st.executeQuery()) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }
}
