package io.queen.pgconn.internal.source;

import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvWriteResult;
import io.queen.embedded.spi.ConnectorHost;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How a new owner takes a source over from the one before it, which may not know it lost the lease (a paused process,
 * a host cut off): the pointer fenced, so that owner's next commit is refused, and its walsender ended when it still
 * holds the slot after a lease TTL. Owner thread only.
 */
final class Takeover {
  /** Logs under Source's logger, the one an operator knows and configures for all of it. */
  private static final Logger LOG = LoggerFactory.getLogger(Source.class);

  private final ConnectorHost host;
  private final SourceSpec spec;
  private final Lease lease;
  /** When this owner first found the slot held by someone else (nanoTime), 0 while it was not. */
  private long slotBusySince;

  Takeover(ConnectorHost host, SourceSpec spec, Lease lease) {
    this.host = host;
    this.spec = spec;
    this.lease = lease;
  }

  /** The slot is free (or a new spell of ownership starts): a wait for it starts again from the next busy one. */
  void slotFree() {
    slotBusySince = 0;
  }

  /**
   * Reads the pointer and writes it back unchanged with {@code expect}, so its version moves: an owner before this one
   * that lost the lease without noticing (a paused process, a host cut off) and goes on finds its next commit refused
   * (its {@code expect} names the old version) and commits nothing more, instead of moving the pointer under this
   * owner. A pointer that moves between the read and the write (that earlier owner's last commit, or a resync) is
   * read again. Returns {@code null}, having logged why, when the lease does not name this node.
   */
  KvEntry fencePointer() {
    Holder h = leaseHolder();
    if (h != Holder.THIS_NODE) {
      // this node must not move the pointer under another owner: it stands by, and says why
      switch (h) {
        case OTHER_NODE -> LOG.warn("{} - source '{}': the lease names another node now (this node was paused past"
            + " it?); standing by", host.nodeId(), spec.name());
        case NOBODY -> LOG.info("{} - source '{}': this node's lease ran out before the stream started (Queen's database"
            + " slow or out of reach?); it takes the lease again", host.nodeId(), spec.name());
        default -> LOG.info("{} - source '{}': Queen's database did not answer the lease check; trying again",
            host.nodeId(), spec.name());
      }
      return null;
    }
    String key = Lease.pointerKey(spec.name());
    KvEntry pe = host.queen().kv().get(Lease.NAMESPACE, key);
    for (int i = 0; pe.found() && i < 5; i++) {
      KvWriteResult w = host.queen().kv().put(Lease.NAMESPACE, key, pe.value(),
          Kv.forever().expect(pe.version()));
      if (w.applied()) {
        return host.queen().kv().get(Lease.NAMESPACE, key);
      }
      pe = host.queen().kv().get(Lease.NAMESPACE, key);
    }
    return pe;
  }

  /**
   * This node holds the lease, and the slot is still held (55006): when the holder is a walsender of this source
   * ({@code application_name}), it belongs to an earlier owner that lost the lease without letting go, a paused
   * process or a host cut off, which PostgreSQL would otherwise keep until {@code wal_sender_timeout} (60 s by default)
   * or for as long as the host's TCP stack answers for it. After one lease TTL of waiting it is ended
   * ({@code pg_terminate_backend}, which the source's role may do to its own sessions), so the takeover takes about
   * two TTLs (the lease's, then this wait). A slot held by anything else (another program) is waited for, never
   * ended.
   */
  void endStaleWalsender(Connection normal) {
    long now = System.nanoTime();
    if (slotBusySince == 0) {
      slotBusySince = now;
      return;
    }
    if (now - slotBusySince < lease.ttl().toNanos() || leaseHolder() != Holder.THIS_NODE) {
      return; // (a node paused past its lease must not end the new owner's walsender)
    }
    try (PreparedStatement st = normal.prepareStatement("select a.pid, pg_terminate_backend(a.pid)"
        + " from pg_replication_slots s join pg_stat_activity a on a.pid = s.active_pid"
        + " where s.slot_name = ? and a.application_name = ? and a.backend_type = 'walsender'")) {
      st.setString(1, spec.slot());
      st.setString(2, SourceConnections.applicationName(spec));
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          LOG.warn("{} - source '{}': the slot {} was still held by walsender pid {} of an earlier owner that lost the"
              + " lease without letting go (a paused process or a host cut off); {} so this node can stream",
              host.nodeId(), spec.name(), spec.slot(), rs.getInt(1), rs.getBoolean(2) ? "it was ended"
              : "ending it was refused, try again");
        }
      }
      slotBusySince = now;
    } catch (SQLException e) {
      LOG.warn("{} - source '{}': could not end the earlier owner's walsender holding slot {} ({})", host.nodeId(),
          spec.name(), spec.slot(), host.describe(e));
    }
  }

  /**
   * Whether the lease, as stored, names this node: what {@link Lease#held()} believes is this node's own view, which a
   * pause past the TTL leaves stale until the renewal thread notices. A lease that names another node is given up here.
   */
  private Holder leaseHolder() {
    KvEntry l;
    try {
      l = Lease.read(host.kv(), spec.name());
    } catch (RuntimeException e) {
      return Holder.UNKNOWN; // Queen's database out of reach: do nothing that needs the lease
    }
    if (l.found() && host.nodeId().equals(l.value().path("node").asText())) {
      return Holder.THIS_NODE;
    }
    lease.abandon();
    return l.found() ? Holder.OTHER_NODE : Holder.NOBODY;
  }

  /** Whom the source's lease names, read from Queen's database. */
  private enum Holder { THIS_NODE, OTHER_NODE, NOBODY, UNKNOWN }
}
