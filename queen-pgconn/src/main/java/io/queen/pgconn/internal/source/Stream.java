package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.CommitResult;
import io.queen.Kv;
import io.queen.KvWriteResult;
import io.queen.Json;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Transaction;
import io.queen.pgconn.internal.spec.Ident;
import io.queen.pgconn.internal.spec.SourceSpec;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.postgresql.PGConnection;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The running stream of one owned source. Threading: the I/O thread owns the
 * {@link PGReplicationStream} (reads, status updates, confirmations) and never waits for Queen; the committer
 * thread turns decoded transactions into events and builds each source transaction (or several small ones
 * together, or a big one in pieces), its payloads encoded, into the Queen transaction the pusher commits next; the
 * pusher thread commits those in stream order, each with the pointer write ({@code expect} = the version this owner
 * last wrote). While the database works on one, every bundle the committer builds joins the next one (within the
 * bundle limits), so a change waits for at most the commit under way and its own ({@link #handOver}).
 * Only after a commit does the pusher publish the transaction's end LSN, which the I/O thread confirms (never
 * backwards); for a failover slot, with {@code synchronized_standby_slots} set in Queen's database, only once the
 * standbys it names have that commit too ({@link StandbyGate}). Changes at or below the pointer (by commit LSN and
 * ordinal) are dropped; the committer judges that against the pointer as it will be once everything it handed over is committed ({@code planned}), which is the
 * pointer Queen holds whenever nothing is in flight. A failure ends all three threads (what was built and not
 * committed is dropped; the pointer did not move for it); {@link #failure()} says why, and the owner starts a new
 * stream. The committer turns each change into events through {@link StreamEvents}.
 *
 * <p>This file is about 700 lines on purpose: the three threads share the queue, the byte budget, the hand-over,
 * the confirmation and the stopping flag, and keeping the threads' loops together keeps every use of that state in
 * view.
 */
final class Stream {
  private static final Logger LOG = LoggerFactory.getLogger(Stream.class);
  /** Why a stream ended. */
  record Failure(Kind kind, Throwable cause) {}

  enum Kind {
    /** The pointer moved under this owner (another owner, or a resync): stop, ownership is gone. */
    POINTER_LOST,
    /**
     * A change of a table this document does not name arrived, and a newer document is stored: the stream stops
     * before it, so that the instance running the new document streams it (a table added by a put).
     */
    DOCUMENT_CHANGED,
    /** Anything else: a connection lost, Queen unavailable; the owner starts again. */
    BROKEN
  }

  /**
   * What the stream tells the owner it runs for (the source, on its owner thread): counts, the committed pointer,
   * and whether its document is still the stored one. The stream's own interface, so that the owner depends on the
   * stream and never the other way; called from the committer and pusher threads.
   */
  interface Owner {
    /** This node's id, for log lines. */
    String node();

    /**
     * Whether this document is still the stored one, asked before the stream passes over a change of a table the
     * document does not name; throws when Queen's database cannot tell now.
     */
    boolean storedStrictly();

    /** Counts rows the snapshot pushed in a committed bundle. */
    void snapshotRows(long n);

    /** Counts a truncate the stream passed over. */
    void truncateSkipped();

    /** A bundle committed: its events and transactions, the pointer now, its last commit time (0: none). */
    void committed(int events, int txs, Pointer p, long commitMicros);
  }

  /** One change as decoded, with its relation at that point of the stream. */
  private record Change(PgMessage.Relation relation, PgMessage message) {}

  /** Work for the committer, in stream order. */
  private sealed interface Item {}

  /** Changes of one source transaction from ordinal {@code first}; {@code last}: its commit came. */
  private record Piece(long commitLsn, long endLsn, long xid, long commitMicros, int first, List<Change> changes,
      boolean last, long bytes, int permits) implements Item {
    boolean whole() {
      return first == 0 && last;
    }
  }

  private record Marker(PgMessage.LogicalMessage message) implements Item {}

  private record TypeInfo(PgMessage.Type type) implements Item {}

  private record Idle(long walEnd) implements Item {}

  /**
   * The Queen transaction the pusher commits next: the pushes of one or more bundles the committer handed over, in
   * stream order (payloads encoded), and the pointer after the last of them, which the pusher writes with them.
   * {@code snapshotRows} counts snapshot rows (a marker's bundle). Guarded by {@link #handLock}.
   */
  private static final class Pending {
    final Transaction tx;
    ObjectNode pointerJson;
    Pointer pointer;
    int events;
    long chars;
    int transactions;
    long commitMicros;
    int snapshotRows;

    Pending(Transaction tx) {
      this.tx = tx;
    }
  }

  private final Owner owner;
  private final SourceSpec spec;
  private final Codec codec;
  private final Queen queen;
  private final ObjectMapper mapper;
  private final Connection normal;
  private final Connection replication;
  private final SnapshotHook hook;
  private final StreamEvents events;
  private final String pointerKey;
  /**
   * Items for the committer. Bounded by count (so markers and type notes cannot pile up) and, for pieces, by
   * their bytes through {@link #budget}: about two bundles of changes wait at most, whatever the size of the
   * source transactions, so a bundle can gather up to {@code maxBundleMessages} small transactions.
   */
  private final BlockingQueue<Item> queue = new LinkedBlockingQueue<>(QUEUE_ITEMS);
  /** Decoded bytes the committer has not taken yet, in KiB; see {@link #permits}. */
  private final Semaphore budget;
  private final int budgetKib;
  /** What the I/O thread may confirm: Queen holds it (and, with a gate, the standbys hold Queen's commit of it). */
  private final AtomicLong confirm = new AtomicLong();
  /** Holds confirmations until the failover standbys have Queen's commit of them; null: none named. */
  private final StandbyGate gate;
  private final AtomicReference<Failure> failure = new AtomicReference<>();
  private volatile boolean stopping;
  private volatile boolean committerIdle = true;
  /** The pointer Queen holds (written by the pusher thread). */
  private volatile Pointer pointer;
  private volatile long pointerVersion;
  /** The pointer after every bundle handed to the pusher (committer thread only). */
  private Pointer planned;
  /**
   * Guards {@link #pending}: the committer adds to it, the pusher takes it; {@link #handChanged} tells either that the
   * other did.
   */
  private final ReentrantLock handLock = new ReentrantLock();
  private final Condition handChanged = handLock.newCondition();
  /** What the pusher commits next; null while nothing waits. */
  private Pending pending;
  /** A stream that delivered a message this recently is flowing: the I/O thread pauses briefly between reads. */
  private static final long FLOWING_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  private static final long FLOWING_PAUSE_NANOS = TimeUnit.MICROSECONDS.toNanos(500);
  private PGReplicationStream stream;
  /** The process id of this stream's walsender (the replication connection's backend), 0 before the start. */
  private int walsenderPid;
  private Thread io;
  private Thread committer;
  private Thread pusher;

  Stream(Owner owner, SourceSpec spec, Codec codec, Queen queen, ObjectMapper mapper, Connection normal,
      Connection replication, SnapshotHook hook, Pointer pointer, long pointerVersion, StandbyGate gate) {
    this.owner = owner;
    this.spec = spec;
    this.codec = codec;
    this.queen = queen;
    this.mapper = mapper;
    this.normal = normal;
    this.replication = replication;
    this.hook = hook;
    this.events = new StreamEvents(spec, codec, normal, hook, owner::storedStrictly, owner.node(), () -> stopping);
    this.pointer = pointer;
    this.planned = pointer;
    this.pointerVersion = pointerVersion;
    this.pointerKey = Lease.pointerKey(spec.name());
    this.gate = gate;
    // with a gate even the pointer is confirmed once the standbys have it: its commit may not have reached them
    this.confirm.set(gate == null ? pointer.flush() : 0);
    this.budgetKib = (int) Math.min(Integer.MAX_VALUE / 2, 2L * spec.maxBundleBytes() / 1024);
    this.budget = new Semaphore(budgetKib);
  }

  /** The most items waiting for the committer: a bundle's worth of one-change transactions, and some. */
  private static final int QUEUE_ITEMS = 16_384;

  /** A piece's share of the budget: its bytes in KiB (at least 1, at most the whole budget). */
  private int permits(long bytes) {
    return (int) Math.max(1, Math.min(budgetKib, bytes / 1024 + 1));
  }

  /** Starts replication at the pointer (throws what START_REPLICATION refused), then the three threads. */
  void start(java.util.function.BiFunction<String, Runnable, Thread> threads) throws SQLException {
    walsenderPid = replication.unwrap(PGConnection.class).getBackendPID();
    events.load();
    stream = replication.unwrap(PGConnection.class).getReplicationAPI().replicationStream().logical()
        .withSlotName(Ident.quote(spec.slot()))
        .withStartPosition(LogSequenceNumber.valueOf(pointer.lsn()))
        .withSlotOption("proto_version", 1)
        .withSlotOption("publication_names", Ident.quote(spec.publication()))
        .withSlotOption("messages", true)
        .withStatusInterval(5, TimeUnit.SECONDS)
        .withAutomaticFlush(false)
        .start();
    if (gate == null) {
      LogSequenceNumber flushed = LogSequenceNumber.valueOf(pointer.flush());
      stream.setFlushedLSN(flushed);
      stream.setAppliedLSN(flushed);
      stream.forceUpdateStatus();
    } else {
      confirmed(gate.committed(pointer.flush())); // before the pusher starts: the gate is its alone from then on
    }
    io = threads.apply("io", this::readLoop);
    committer = threads.apply("commit", this::commitLoop);
    pusher = threads.apply("push", this::pushLoop);
    io.start();
    committer.start();
    pusher.start();
  }

  Failure failure() {
    return failure.get();
  }

  boolean alive() {
    return failure.get() == null && !stopping;
  }

  Pointer pointer() {
    return pointer;
  }

  /** Ends both threads soon, without waiting (the lease was lost). */
  void abort() {
    fail(Kind.BROKEN, null);
  }

  /**
   * Stops the threads, closes the replication connection and waits (at most {@link SourceConnections#WALSENDER_GONE_MS}) until its
   * walsender has let go of the slot, so that whoever starts next, this node again or the next owner once the lease
   * is given back, does not find the slot still active (55006). The owner closes the normal connection.
   */
  void stop() {
    stopping = true;
    if (committer != null) {
      committer.interrupt();
    }
    if (pusher != null) {
      pusher.interrupt();
    }
    try {
      if (io != null) {
        io.join(10_000);
      }
      if (committer != null) {
        committer.join(10_000);
      }
      if (pusher != null) {
        pusher.join(10_000);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      replication.close();
    } catch (SQLException | RuntimeException e) {
      // the connection may be gone
    }
    SourceConnections.awaitWalsenderGone(normal, spec.slot(), walsenderPid);
  }

  private void fail(Kind kind, Throwable cause) {
    failure.compareAndSet(null, new Failure(kind, cause));
    stopping = true;
  }

  // ------------------------------------------------------------------------------ the I/O thread

  private void readLoop() {
    Map<Integer, PgMessage.Relation> relations = new java.util.HashMap<>();
    PgMessage.Begin open = null;
    List<Change> changes = new ArrayList<>();
    int first = 0;
    int ordinal = 0;
    long bytes = 0;
    long lastIdle = System.nanoTime();
    long lastMessage = lastIdle - FLOWING_NANOS;
    try {
      while (!stopping) {
        applyConfirm();
        ByteBuffer buf = stream.readPending();
        if (buf == null) {
          long now = System.nanoTime();
          if (open == null && queue.isEmpty() && committerIdle && now - lastIdle > TimeUnit.SECONDS.toNanos(5)) {
            lastIdle = now;
            long w = stream.getLastReceiveLSN().asLong();
            if (Long.compareUnsigned(w, confirm.get()) > 0) {
              put(new Idle(w));
            }
          }
          // nothing buffered: a short pause while changes are flowing (a transaction every few milliseconds would
          // otherwise wait up to a full pause each), the usual one when the stream has been quiet for a while
          if (now - lastMessage < FLOWING_NANOS) {
            LockSupport.parkNanos(FLOWING_PAUSE_NANOS);
          } else {
            Thread.sleep(10);
          }
          continue;
        }
        lastMessage = System.nanoTime();
        PgMessage m = codec.decode(buf);
        if (m instanceof PgMessage.Begin b) {
          open = b;
          changes = new ArrayList<>();
          first = 0;
          ordinal = 0;
          bytes = 0;
        } else if (m instanceof PgMessage.Relation r) {
          relations.put(r.oid(), r);
        } else if (m instanceof PgMessage.Type t) {
          put(new TypeInfo(t));
        } else if (m instanceof PgMessage.Insert || m instanceof PgMessage.Update || m instanceof PgMessage.Delete) {
          int oid = m instanceof PgMessage.Insert i ? i.relationOid() : m instanceof PgMessage.Update u ? u.relationOid()
              : ((PgMessage.Delete) m).relationOid();
          changes.add(new Change(relations.get(oid), m));
          ordinal++;
          bytes += size(m);
          if (open != null && (changes.size() >= spec.maxBundleMessages() || bytes >= spec.maxBundleBytes())) {
            put(new Piece(open.finalLsn(), 0, open.xid(), open.commitTimeMicros(), first, changes, false, bytes,
                permits(bytes)));
            first = ordinal;
            changes = new ArrayList<>();
            bytes = 0;
          }
        } else if (m instanceof PgMessage.Truncate) {
          owner.truncateSkipped();
        } else if (m instanceof PgMessage.Commit c) {
          if (open != null) {
            put(new Piece(c.commitLsn(), c.endLsn(), open.xid(), c.commitTimeMicros(), first, changes, true, bytes,
                permits(bytes)));
          }
          open = null;
          changes = new ArrayList<>();
        } else if (m instanceof PgMessage.LogicalMessage lm && SnapshotHook.PREFIX.equals(lm.prefix())
            && !lm.transactional()) {
          put(new Marker(lm));
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (SQLException | RuntimeException | Error e) { // an Error too: a thread that died unseen left "streaming"
      if (!stopping) {
        fail(Kind.BROKEN, e);
      }
    } finally {
      stopping = true;
      if (committer != null) {
        committer.interrupt();
      }
    }
  }

  private static long size(PgMessage m) {
    long n = 64;
    for (PgMessage.Tuple t : tuples(m)) {
      if (t != null) {
        for (String s : t.texts()) {
          n += s == null ? 4 : s.length() + 8;
        }
      }
    }
    return n;
  }

  private static List<PgMessage.Tuple> tuples(PgMessage m) {
    if (m instanceof PgMessage.Insert i) {
      return java.util.Arrays.asList(i.after());
    }
    if (m instanceof PgMessage.Update u) {
      return java.util.Arrays.asList(u.before(), u.after());
    }
    return java.util.Arrays.asList(((PgMessage.Delete) m).before());
  }

  /**
   * Hands an item to the committer (a piece once its bytes fit the budget); while the committer is busy, keeps
   * the walsender answered.
   */
  private void put(Item item) throws InterruptedException, SQLException {
    int permits = item instanceof Piece p ? p.permits() : 0;
    while (!stopping && permits > 0) {
      if (budget.tryAcquire(permits, 500, TimeUnit.MILLISECONDS)) {
        break;
      }
      applyConfirm();
      stream.forceUpdateStatus();
    }
    while (!stopping) {
      if (queue.offer(item, 500, TimeUnit.MILLISECONDS)) {
        return;
      }
      applyConfirm();
      stream.forceUpdateStatus();
    }
  }

  /** The committer took {@code item} off the queue: its bytes leave the budget. */
  private void taken(Item item) {
    if (item instanceof Piece p) {
      budget.release(p.permits());
    }
  }

  /** R1/R2: confirm what the committer says Queen holds, never backwards. */
  private void applyConfirm() throws SQLException {
    long x = confirm.get();
    if (Long.compareUnsigned(stream.getLastFlushedLSN().asLong(), x) < 0) {
      LogSequenceNumber lsn = LogSequenceNumber.valueOf(x);
      stream.setFlushedLSN(lsn);
      stream.setAppliedLSN(lsn);
      stream.forceUpdateStatus();
    }
  }

  // ------------------------------------------------------------------------------ the committer thread

  private void commitLoop() {
    try {
      while (!stopping) {
        Item first = queue.poll(200, TimeUnit.MILLISECONDS);
        if (first == null) {
          committerIdle = true;
          continue;
        }
        taken(first);
        committerIdle = false;
        if (first instanceof TypeInfo t) {
          codec.learn(t.type());
        } else if (first instanceof Idle i) {
          if (queue.isEmpty()) {
            idleAdvance(i.walEnd());
          }
        } else if (first instanceof Marker mk) {
          marker(mk.message());
        } else if (first instanceof Piece p) {
          List<Piece> bundle = new ArrayList<>();
          bundle.add(p);
          int changes = p.changes().size();
          long bytes = p.bytes();
          while (p.whole()) {
            Item next = queue.peek();
            if (next instanceof TypeInfo t) {
              codec.learn(t.type());
              queue.poll();
              continue;
            }
            if (!(next instanceof Piece q) || !q.whole() || changes + q.changes().size() > spec.maxBundleMessages()
                || bytes + q.bytes() > spec.maxBundleBytes()) {
              break;
            }
            taken(queue.poll());
            bundle.add(q);
            changes += q.changes().size();
            bytes += q.bytes();
            p = q;
          }
          push(bundle);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (StreamEvents.DocumentChanged e) {
      if (!stopping) {
        fail(Kind.DOCUMENT_CHANGED, null);
      }
    } catch (SQLException | RuntimeException | Error e) {
      if (!stopping) {
        fail(Kind.BROKEN, e);
      }
    } finally {
      stopping = true;
    }
  }

  private void push(List<Piece> bundle) throws SQLException, InterruptedException {
    events.newBundle();
    Pointer p = planned;
    List<SourceEvent> out = new ArrayList<>();
    int transactions = 0;
    Piece last = bundle.get(bundle.size() - 1);
    for (Piece piece : bundle) {
      StreamEvents.Commit at = new StreamEvents.Commit(piece.commitLsn(), piece.xid(), piece.commitMicros(), p.epoch());
      if (piece.last()) {
        transactions++;
      }
      for (int i = 0; i < piece.changes().size(); i++) {
        int ordinal = piece.first() + i;
        if (p.covers(piece.commitLsn(), ordinal)) {
          continue; // R6: already in Queen
        }
        Change ch = piece.changes().get(i);
        events.add(ch.relation(), ch.message(), at, ordinal, out);
      }
    }
    long flush = last.last() ? last.endLsn() : p.flush();
    Pointer next = new Pointer(last.commitLsn(), last.first() + last.changes().size(), last.last(), flush, p.epoch(),
        hook == null ? p.snapshot() : hook.progress(), false);
    if (Long.compareUnsigned(last.commitLsn(), p.lsn()) < 0
        || (last.commitLsn() == p.lsn() && (p.complete() || next.count() < p.count()
            || (next.count() == p.count() && !next.complete())))) {
      // the whole bundle was in Queen already (a restart re-reads from the pointer; for a big transaction in
      // pieces, from its start): handing its pointer over would move the pointer back within the transaction
      return;
    }
    handOver(out, next, transactions, last.commitMicros(), 0);
  }

  private void marker(PgMessage.LogicalMessage m) throws InterruptedException {
    Pointer p = planned;
    if (hook == null || p.covers(m.lsn())) {
      return;
    }
    List<SourceEvent> events = hook.onMarker(m);
    long flush = Long.compareUnsigned(m.lsn(), p.flush()) > 0 ? m.lsn() : p.flush();
    // a marker's LSN is the end of its record, which is where the next record starts, possibly a commit: the
    // pointer says "none of a transaction committed at this LSN is in" (count 0, not complete), or that
    // transaction would be taken as pushed and dropped
    Pointer next = new Pointer(m.lsn(), 0, false, flush, p.epoch(), hook.progress(), false);
    int rows = 0; // the chunk's rows, counted once Queen committed them (fills are not rows)
    for (SourceEvent e : events) {
      if (e.op() == 'r') {
        rows++;
      }
    }
    handOver(events, next, 0, 0, rows);
  }

  /** R4: nothing in flight; the pointer moves to the WAL end first, then the slot is confirmed there. */
  private void idleAdvance(long walEnd) throws InterruptedException {
    Pointer p = planned;
    if (Long.compareUnsigned(walEnd, p.flush()) <= 0 || Long.compareUnsigned(walEnd, p.lsn()) <= 0) {
      return;
    }
    // walEnd is where the next record starts, possibly a commit not yet received: none of it is in (as a marker)
    Pointer next = new Pointer(walEnd, 0, false, walEnd, p.epoch(), hook == null ? p.snapshot() : hook.progress(),
        false);
    handOver(List.of(), next, 0, 0, 0);
  }

  /**
   * Hands a bundle to the pusher: its events (payloads encoded now, on the committer thread) join the Queen
   * transaction the pusher commits next, and its pointer becomes that transaction's. While the pusher commits one
   * transaction, every bundle the committer builds meanwhile joins the next one, as long as their events stay within
   * {@code maxBundleMessages} and {@code maxBundleBytes} (measured on the events' JSON text); past that the committer
   * waits for the pusher to take it. So a change waits for at most the commit under way and its own, and the pusher
   * never waits for a bundle that was ready when its commit ended. Joining bundles is what committing them one after
   * the other in one transaction would be: the pushes in stream order, then the pointer after the last; no state of
   * Queen's is reached that the bundles one by one would not also reach.
   */
  private void handOver(List<SourceEvent> events, Pointer after, int transactions, long commitMicros, int snapshotRows)
      throws InterruptedException {
    long chars = 0;
    for (SourceEvent e : events) {
      chars += e.json().length();
    }
    ObjectNode pointerJson = after.json(mapper, codec);
    handLock.lockInterruptibly();
    try {
      while (!stopping && pending != null && (pending.events + events.size() > spec.maxBundleMessages()
          || pending.chars + chars > spec.maxBundleBytes())) {
        handChanged.await(200, TimeUnit.MILLISECONDS);
      }
      if (stopping) {
        return;
      }
      Pending n = pending != null ? pending : new Pending(queen.transaction());
      try {
        for (SourceEvent e : events) {
          n.tx.push(PushItem.to(e.queue(), e.partition(), Json.of(e.json())).transactionId(e.transactionId()));
        }
      } catch (RuntimeException | Error e) {
        // part of the bundle joined: nothing of the transaction may be committed (the stream ends)
        pending = null;
        fail(Kind.BROKEN, e);
        throw e;
      }
      n.pointerJson = pointerJson;
      n.pointer = after;
      n.events += events.size();
      n.chars += chars;
      n.transactions += transactions;
      if (commitMicros != 0) {
        n.commitMicros = commitMicros;
      }
      n.snapshotRows += snapshotRows;
      pending = n;
      planned = after;
      handChanged.signalAll();
    } finally {
      handLock.unlock();
    }
  }

  // ------------------------------------------------------------------------------ the pusher thread

  /** Commits the committer's bundles in order, each with the pointer ({@code expect}), then the confirmation. */
  private void pushLoop() {
    try {
      while (!stopping) {
        Pending r = take();
        if (r != null) {
          commit(r);
        } else if (gate != null && gate.holding()) {
          confirmed(gate.poll());
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (SQLException | RuntimeException | Error e) {
      if (!stopping) {
        fail(Kind.BROKEN, e);
      }
    } finally {
      stopping = true;
      if (committer != null) {
        committer.interrupt();
      }
    }
  }

  /** What the committer handed over since the last take, waiting up to 200 ms for it; null: nothing. */
  private Pending take() throws InterruptedException {
    handLock.lockInterruptibly();
    try {
      if (pending == null && !stopping) {
        handChanged.await(200, TimeUnit.MILLISECONDS);
      }
      Pending n = stopping ? null : pending;
      if (n != null) {
        pending = null;
        handChanged.signalAll();
      }
      return n;
    } finally {
      handLock.unlock();
    }
  }

  /** Lets the I/O thread confirm {@code flush} (never backwards); {@link StandbyGate#NONE}: nothing new. */
  private void confirmed(long flush) {
    if (flush != StandbyGate.NONE) {
      confirm.accumulateAndGet(flush, (a, b) -> Long.compareUnsigned(a, b) >= 0 ? a : b);
    }
  }

  /** One Queen transaction: the events and the pointer ({@code expect}), then the confirmation. */
  private void commit(Pending ready) throws SQLException {
    Transaction tx = ready.tx;
    tx.put(Lease.NAMESPACE, pointerKey, ready.pointerJson, Kv.forever().expect(pointerVersion).required());
    CommitResult r = tx.commit();
    if (!r.success()) {
      fail(Kind.POINTER_LOST, null);
      throw new IllegalStateException("pointer moved");
    }
    KvWriteResult w = r.writes().get(r.writes().size() - 1);
    pointerVersion = w.version();
    Pointer next = ready.pointer;
    pointer = next;
    // flush is always safe to confirm: a piece short of its transaction's end keeps the previous one
    if (gate == null) {
      confirmed(next.flush());
    } else {
      // on failure: committed and not confirmed; the next start holds the pointer's flush until the standbys have it
      confirmed(gate.committed(next.flush()));
    }
    if (ready.snapshotRows > 0) {
      owner.snapshotRows(ready.snapshotRows);
    }
    owner.committed(ready.events, ready.transactions, next, ready.commitMicros);
  }
}
