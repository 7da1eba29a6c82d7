package io.queen.embedded.internal.consume;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.BatchHandler;
import io.queen.BrokerClosedException;
import io.queen.CommitResult;
import io.queen.DeadLetterException;
import io.queen.KvReason;
import io.queen.KvWriteResult;
import io.queen.Message;
import io.queen.MessageHandler;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.Transaction;
import io.queen.TransactionalBatchHandler;
import io.queen.TransactionalHandler;
import io.queen.embedded.internal.db.LogThrottle;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.HandlerAcks;
import io.queen.embedded.internal.tx.TransactionImpl;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The consume loop: N worker threads, each popping a batch, running the handler in offset order per
 * partition, and acknowledging. A handler that throws (exception or {@link Error}) fails its message:
 * the rest of that partition's batch is not run and is redelivered after it. Leases are renewed while
 * handlers run. {@link #close} stops popping, waits for running handlers up to the grace period,
 * interrupts them, and gives back the leases still held (a message interrupted by close is not counted
 * as a failed attempt).
 *
 * <p>Four handler shapes: one message or one batch, each either acknowledged by the loop after the
 * handler returns, or committed by the loop as one bundle with the handler's own transactional effects
 * ({@link TransactionalHandler}, {@link TransactionalBatchHandler}: the bundle carries the ack, so the
 * loop never acks those messages a second time).
 *
 * <p>Logging, for an operator: a handler failure is a WARN (once per message and attempt, with the
 * exception; identical repeats are summarised by a {@link LogThrottle}); a round that fails (the database
 * is unreachable) is one WARN when it starts failing and one INFO when it recovers, with how long it was
 * down; dead-letter moves are logged by the {@link Broker} where the database reports them.
 */
public final class SubscriptionImpl implements RunningSubscription {
  private static final Logger LOG = LoggerFactory.getLogger(SubscriptionImpl.class);

  private final ConsumerNode queen;
  private final Broker.PopRequest request;
  private final int concurrency;
  private final Duration defaultGrace;
  private final MessageHandler one;
  private final BatchHandler many;
  private final TransactionalHandler txOne;
  private final TransactionalBatchHandler txMany;
  /** A connector's batch handler that acknowledges by itself (the SPI's {@code OwnedBatchHandler}). */
  private final io.queen.embedded.spi.OwnedBatchHandler owned;
  /** The worker threads' role name, or null: {@code <queue>-<group>}. */
  private final String role;
  private final String where;
  private final List<Thread> workers = new ArrayList<>();
  private Thread claimer;
  /** Sends the workers' acknowledgements together: one call (one commit) for what gathered meanwhile. */
  private AckCoalescer acker;
  /** Units of work popped by the claimer: one partition's messages, or a batch handler's whole batch. */
  private final java.util.concurrent.LinkedBlockingQueue<Unit> units = new java.util.concurrent.LinkedBlockingQueue<>();
  /** The partitions to pop next, or a scan (pushes name their partitions; units hold theirs while they run). */
  private final Hints hints;
  /** Whether the claimer last waited for a free worker. */
  private volatile boolean starved;
  /** Workers waiting for a unit. */
  private final java.util.concurrent.atomic.AtomicInteger idle = new java.util.concurrent.atomic.AtomicInteger();
  private final Object idleSignal = new Object();
  private long nudgeCount; // guarded by idleSignal
  private final io.queen.embedded.internal.log.Wakeups.Listener onWake = this::woken;

  /** One partition's messages (or a batch handler's batch), the partitions they are of, and the pop's limit. */
  private record Unit(List<Message> messages, List<String> partitions, int take) {
    /** Whether its partition may hold more ready messages than the pop took (so the claimer should look again). */
    boolean mayBeCut() {
      return messages.size() >= take || (!messages.isEmpty() && messages.get(0).attempt() > 1);
    }
  }
  /** Most partitions one pop may take (the builder's {@code partitions}), or 0: as many as there are idle workers. */
  private final int maxPartitions;
  private final AtomicBoolean running = new AtomicBoolean(true);
  /** See {@link #queueMissing()}. */
  private volatile boolean queueMissing;
  /** Watches the queue this subscription's start found missing, until it exists; null otherwise. */
  private volatile MissingQueueWatch missingQueue;
  private final AtomicBoolean closed = new AtomicBoolean();
  /** Held by {@link #start()} and the first half of a close, which exclude each other. */
  private final Object lifecycle = new Object();
  private final AtomicLong handled = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private final AtomicLong acked = new AtomicLong();
  private final AtomicLong alreadyDone = new AtomicLong();
  private final AtomicLong deadLettered = new AtomicLong();
  private final AtomicLong leaseLost = new AtomicLong();
  /** Leases held by running batches: one message per (partition, lease) stands for the lease. */
  private final Set<Message> inFlight = ConcurrentHashMap.newKeySet();
  /** The bundles of transactional handlers running now: a close past its grace period aborts their connections. */
  private final Set<TransactionImpl> openTransactions = ConcurrentHashMap.newKeySet();
  /** How long a close waits, past its grace period and the interrupt, for every thread of the subscription. */
  static final long CLOSE_MARGIN_MS = 500;
  private final LogThrottle throttle = new LogThrottle();
  /** When rounds started failing (System.nanoTime), or 0 while they succeed; shared by the workers. */
  private final AtomicLong failingSince = new AtomicLong();
  private final AtomicLong failedRounds = new AtomicLong();
  private final AtomicBoolean warnedUnrequiredMarker = new AtomicBoolean();
  private final AtomicBoolean warnedSelfCommit = new AtomicBoolean();
  private volatile ScheduledFuture<?> renewal;
  /** The lease time of this subscription's pops; set when its threads start. */
  private volatile Duration lease = Duration.ofSeconds(30);
  /** False for a group whose expired leases are released without an attempt; set before {@link #start}. */
  private volatile boolean expiryCounts = true;
  /** Whether the group's flag is in place (only asked for when {@code expiryCounts} is false). */
  private volatile boolean expiryMarked;

  /** Exactly one of the four handlers is non-null. */
  SubscriptionImpl(ConsumerNode queen, Broker.PopRequest request, int maxPartitions, int concurrency, Duration grace,
      MessageHandler one, BatchHandler many, TransactionalHandler txOne, TransactionalBatchHandler txMany) {
    this(queen, request, maxPartitions, concurrency, grace, one, many, txOne, txMany, null, null);
  }

  /** Exactly one of the five handlers is non-null; {@code role} names the threads (null: queue and group). */
  SubscriptionImpl(ConsumerNode queen, Broker.PopRequest request, int maxPartitions, int concurrency, Duration grace,
      MessageHandler one, BatchHandler many, TransactionalHandler txOne, TransactionalBatchHandler txMany,
      io.queen.embedded.spi.OwnedBatchHandler owned, String role) {
    this.owned = owned;
    this.role = role;
    this.queen = queen;
    this.maxPartitions = maxPartitions;
    this.request = request;
    this.concurrency = concurrency;
    this.defaultGrace = grace;
    this.one = one;
    this.many = many;
    this.txOne = txOne;
    this.txMany = txMany;
    this.where = Broker.where(request.queue(), request.group());
    this.hints = new Hints(request.partition() != null);
  }


  /**
   * Starts the threads, unless a close came first (a node closing while {@code consume(...)} ran): start and the
   * first half of close exclude each other, so a closed subscription never starts a thread nobody stops.
   */
  void start() {
    synchronized (lifecycle) {
      if (!closed.get()) {
        startThreads();
      }
    }
  }

  private void startThreads() {
    lease = request.leaseTime() != null ? request.leaseTime() : queen.broker().catalogue().config(request.queue()).leaseTime();
    long every = Math.max(50, lease.toMillis() / 3);
    renewal = queen.scheduler().scheduleAtFixedRate(this::renewLeases, every, every, TimeUnit.MILLISECONDS);
    String group = Queen.DEFAULT_GROUP.equals(request.group()) ? "default" : request.group();
    String prefix = role != null ? role : request.queue() + "-" + group;
    for (int i = 0; i < concurrency; i++) {
      Thread t = role != null ? queen.newDaemon(prefix, this::work) : queen.newThread(prefix + "-" + i, this::work);
      workers.add(t);
    }
    claimer = role != null ? queen.newDaemon(prefix + "-claimer", this::claim)
        : queen.newThread(prefix + "-claimer", this::claim);
    acker = new AckCoalescer(queen.broker(), lease, queen.nodeId() + " - " + where,
        r -> role != null ? queen.newDaemon(prefix + "-acker", r)
        : queen.newThread(prefix + "-acker", r));
    queen.wakeups().addListener(request.queue(), onWake);
    workers.forEach(Thread::start);
    claimer.start();
    LOG.info("{} - consuming {} with {} worker(s), batch {}, {} partition(s) per pop{}{}", queen.nodeId(), where,
        concurrency, request.batch(), maxPartitions > 0 ? String.valueOf(maxPartitions) : "as many as idle workers",
        txOne != null || txMany != null ? ", in transactions" : "", startsAt());
  }

  /** Where the group starts if Queen has not seen it yet: the detail a new user misses when a backlog is ignored. */
  private String startsAt() {
    if (Queen.DEFAULT_GROUP.equals(request.group())) {
      return "";
    }
    if (request.from() != null) {
      return "; if the group is new, it starts at messages created from " + request.from();
    }
    return "ALL".equals(request.mode()) ? "; if the group is new, it starts at the beginning"
        : "; if the group is new, it starts at the end (messages pushed from now on)";
  }

  @Override
  public String queue() {
    return request.queue();
  }

  @Override
  public String group() {
    return request.group();
  }

  @Override
  public boolean isRunning() {
    return running.get();
  }

  @Override
  public boolean queueMissing() {
    return queueMissing;
  }

  /** The queue did not exist when this subscription started: a {@link MissingQueueWatch} watches it. */
  void queueMissingAtStart() {
    queueMissing = true;
    missingQueue = new MissingQueueWatch(queen, request.queue(), request.group(), LOG);
  }

  /** Called after a pop that returned nothing: while the queue is missing, says once that it does not exist. */
  private void afterEmptyPop() {
    MissingQueueWatch w = missingQueue;
    if (w != null && w.afterEmptyPop()) {
      missingQueue = null;
      queueMissing = false;
    }
  }

  @Override
  public long handled() {
    return handled.get();
  }

  @Override
  public long failed() {
    return failed.get();
  }

  @Override
  public long acked() {
    return acked.get();
  }

  @Override
  public long alreadyDone() {
    return alreadyDone.get();
  }

  @Override
  public long deadLettered() {
    return deadLettered.get();
  }

  @Override
  public long leaseLost() {
    return leaseLost.get();
  }

  /** Counts an outcome here and as {@code queen.consumer.outcomes{queue,group,outcome}}. */
  private void count(AtomicLong counter, String outcome, long n) {
    counter.addAndGet(n);
    queen.broker().metrics().consumerOutcome(request.queue(), request.group(), outcome, n);
  }


  // ------------------------------------------------------------------------------------ the loop

  /**
   * The claimer: the one thread of the subscription that pops. It pops only when workers are idle, for as
   * many partitions as there are idle workers (each partition's messages go to one worker, in offset
   * order), and after a pop that took less than it could it waits for a wake-up (a push, or the poll
   * interval) instead of popping again: a push wakes one thread per subscription, not every worker, and
   * an idle subscription does not spin.
   */
  private void claim() {
    try {
      claimLoop();
    } catch (Error e) {
      // not a round that failed (those are retried): the loop cannot go on, so the subscription says so and closes
      // rather than look running while nothing is popped
      LOG.error("{} - the consume loop of {} stopped on {}; the subscription closes", queen.nodeId(), where,
          e.getClass().getName());
      if (beginClose()) {
        long deadline = System.nanoTime() + defaultGrace.toNanos();
        queen.newDaemon("closer", () -> finishClose(deadline)).start();
      }
      throw e;
    }
  }

  private void claimLoop() {
    long backoff = 0;
    while (running.get()) {
      try {
        long seen = nudges();
        // announced before the workers are counted: a worker going idle counts itself, then reads this flag, so
        // either the count below sees it or it sees the flag and nudges (set after the count, a worker could slip
        // between the two and the claimer would wait a whole poll interval with work waiting)
        starved = true;
        // a connector's loop pops one batch ahead per worker: its pop overlaps the running batch
        int free = idle.get() - units.size() + (owned != null ? concurrency : 0);
        if (free <= 0) {
          awaitNudge(seen); // a worker that goes idle nudges
          continue;
        }
        starved = false;
        if (!expiryCounts && !expiryMarked) {
          // no lease of this group is taken before its flag is in place (a node killed holding one must not
          // have it counted); the queue does not exist yet: wait like an empty pop
          if (!queen.broker().groupExpiry(request, false)) {
            afterEmptyPop();
            awaitNudge(seen);
            continue;
          }
          expiryMarked = true;
        }
        boolean batchShape = many != null || txMany != null || owned != null;
        int parts = batchShape ? (maxPartitions > 0 ? maxPartitions : Math.min(1000, request.batch()))
            : Math.min(free, maxPartitions > 0 ? maxPartitions : 1000);
        String[] names = hints.next(System.nanoTime(), queen.pollInterval().toNanos(), parts);
        if (names != null && names.length == 0) {
          awaitNudge(seen); // nothing named since the last pop, and no scan due before the poll interval
          continue;
        }
        int take = batchShape ? request.batch() : (int) Math.min(10_000L, (long) parts * request.batch());
        List<Message> got;
        try {
          got = queen.broker().pop(new Broker.PopRequest(request.queue(), request.group(), take, parts,
              request.partition(), request.leaseTime(), request.mode(), request.from(), false, names));
        } catch (RuntimeException e) {
          hints.popped(names, List.of(), true); // nothing taken: the names stay, or the scan is asked for again
          throw e;
        }
        queen.broker().metrics().consumerPop(request.queue(), request.group(), got.isEmpty());
        backoff = 0;
        roundSucceeded();
        if (got.isEmpty()) {
          hints.popped(names, List.of(), false);
          afterEmptyPop();
          awaitNudge(seen);
          continue;
        }
        if (queueMissing) {
          queueMissing = false; // messages: the queue exists (the watch's own check may come later)
        }
        Set<String> took = dispatch(got, batchShape, take);
        int partitionsGot = took.size();
        boolean full = got.size() >= take || partitionsGot >= parts;
        hints.popped(names, took, full);
        if (!full) {
          // it took everything that was ready: wait for a push, a worker that finished (its partition may have
          // more), or the poll interval; anything that happened during the pop has already moved past 'seen'
          awaitNudge(seen);
        }
      } catch (InterruptedException e) {
        if (!running.get()) {
          break;
        }
        Thread.interrupted(); // not a shutdown: carry on
      } catch (RuntimeException e) {
        if (!running.get()) {
          break;
        }
        long cap = queen.pollInterval().toMillis() * 4;
        backoff = Math.min(cap, Math.max(50, backoff * 2));
        long sleep = backoff / 2 + ThreadLocalRandom.current().nextLong(backoff / 2 + 1); // jitter: no herd
        roundFailed(e, cap);
        try {
          Thread.sleep(sleep);
        } catch (InterruptedException ie) {
          if (!running.get()) {
            break;
          }
        }
      }
    }
  }

  /** A push to the queue (of this node, or notified): the partitions it named, or null. */
  private void woken(java.util.Collection<String> partitions) {
    hints.woken(partitions);
    nudge();
  }

  /** For a group whose consumer counts attempts itself: its expired leases count none. Before start. */
  void expiryNotCounted() {
    expiryCounts = false;
  }

  /** What the claimer waits for: a push to the queue, a worker going idle or finishing, close. */
  private long nudges() {
    synchronized (idleSignal) {
      return nudgeCount;
    }
  }

  private void nudge() {
    synchronized (idleSignal) {
      nudgeCount++;
      idleSignal.notifyAll();
    }
  }

  /** Waits until something nudged the claimer after {@code seen}, or the poll interval passed. */
  private void awaitNudge(long seen) throws InterruptedException {
    long deadline = System.nanoTime() + queen.pollInterval().toNanos();
    synchronized (idleSignal) {
      while (nudgeCount == seen && running.get()) {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        if (left <= 0) {
          return;
        }
        idleSignal.wait(left);
      }
    }
  }

  /**
   * Hands a popped batch to the workers: one unit per partition (per-message handlers), or the whole
   * batch as one unit (batch handlers). The leases are renewed from now on, and the units hold their partitions
   * (a push into one waits until the unit is settled). Returns the partitions' names.
   */
  private Set<String> dispatch(List<Message> got, boolean batchShape, int take) {
    Map<Long, List<Message>> byPartition = new LinkedHashMap<>();
    for (Message m : got) {
      byPartition.computeIfAbsent(m.partitionId(), k -> new ArrayList<>()).add(m);
    }
    Set<String> names = new java.util.LinkedHashSet<>();
    for (List<Message> part : byPartition.values()) {
      inFlight.add(part.get(0));
      names.add(part.get(0).partition());
    }
    if (batchShape) {
      List<String> all = new ArrayList<>(names);
      hints.hold(all);
      units.add(new Unit(got, all, take));
    } else {
      for (List<Message> part : byPartition.values()) {
        List<String> one = List.of(part.get(0).partition());
        hints.hold(one);
        units.add(new Unit(part, one, take));
      }
    }
    return names;
  }

  /**
   * A worker: takes units from the claimer and runs them. Going idle nudges the claimer only when there may
   * be work it could not see: it was waiting for a free worker, a push arrived while this unit's partition
   * was leased (the pop could not take that partition then: {@link Hints} kept its name until now), the unit
   * failed (a retry may be due now), or the pop may have cut the partition short (it took as many as it could, or
   * a retried head came alone). Otherwise a message costs one pop, not one more empty pop after every unit.
   */
  private void work() {
    boolean mayHaveMore = true;
    while (running.get()) {
      Unit unit;
      idle.incrementAndGet();
      if (mayHaveMore || starved) {
        nudge();
      }
      try {
        unit = units.take();
      } catch (InterruptedException e) {
        if (!running.get()) {
          break;
        }
        Thread.interrupted();
        continue;
      } finally {
        idle.decrementAndGet();
      }
      if (unit == STOP || !running.get()) {
        break; // a unit taken now is not run: its lease is given back by close()
      }
      long failures = failed.get() + leaseLost.get();
      boolean ackInFlight = runBatch(unit);
      // with the ack in flight the partition is still leased: the acker nudges the claimer when it is not
      mayHaveMore = !ackInFlight
          && hints.settled(unit.partitions(), failed.get() + leaseLost.get() != failures || unit.mayBeCut());
    }
  }

  /** Put in {@link #units} once per worker by close(), so that idle workers stop at once. */
  private static final Unit STOP = new Unit(List.of(), List.of(), 1);

  /** One WARN when rounds start failing; the rest at DEBUG until they recover. */
  private void roundFailed(RuntimeException e, long capMillis) {
    failedRounds.incrementAndGet();
    if (failingSince.compareAndSet(0, System.nanoTime())) {
      LOG.warn("{} - consumer of {} cannot pop: {}; retrying with back-off (up to {} ms) until it works", queen.nodeId(),
          where, Sql.describe(e), capMillis);
    } else {
      LOG.debug("{} - consumer of {} still cannot pop: {}", queen.nodeId(), where, Sql.describe(e));
    }
  }

  private void roundSucceeded() {
    long since = failingSince.get();
    if (since != 0 && failingSince.compareAndSet(since, 0)) {
      long rounds = failedRounds.getAndSet(0);
      LOG.info("{} - consumer of {} recovered: pops work again after {} ms ({} failed round(s))", queen.nodeId(),
          where, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since), rounds);
    }
  }

  /**
   * Runs one unit. Returns true when its acknowledgement is still in flight (a plain handler's completed
   * unit: the acker commits it and then lets the leases go and nudges the claimer), false when it is settled.
   */
  private boolean runBatch(Unit unit) {
    List<Message> batch = unit.messages();
    Map<Long, List<Message>> byPartition = new LinkedHashMap<>();
    for (Message m : batch) {
      byPartition.computeIfAbsent(m.partitionId(), k -> new ArrayList<>()).add(m);
    }
    List<Message> heads = new ArrayList<>();
    byPartition.values().forEach(l -> heads.add(l.get(0)));
    boolean async = false;
    try {
      if (one != null) {
        async = runEach(byPartition, heads, unit);
      } else if (many != null) {
        async = runMany(batch, heads, unit);
      } else if (owned != null) {
        async = runOwned(batch, heads, unit);
      } else if (txOne != null) {
        for (List<Message> part : byPartition.values()) {
          runTxEach(part, txOne);
        }
      } else {
        runTxBatch(batch, byPartition, heads);
      }
    } finally {
      if (!async) {
        inFlight.removeAll(heads);
      }
    }
    return async;
  }

  /**
   * A unit whose messages all completed: its acknowledgement goes to the acker and the worker goes on at
   * once; the leases stay renewed until the ack committed, and the claimer is nudged then if the unit's
   * partition may hold more (as the worker would have done).
   */
  private boolean settleAsync(List<Broker.AckRequest> acks, List<Message> heads, Unit unit) {
    AckCoalescer a = acker;
    if (a == null || !running.get()) {
      return false;
    }
    a.ackAsync(acks, res -> {
      count(res);
      inFlight.removeAll(heads);
      if (hints.settled(unit.partitions(), unit.mayBeCut() || res.stream()
          .anyMatch(r -> r.outcome() != AckOutcome.ACKED && r.outcome() != AckOutcome.ALREADY_ACKED))) {
        nudge();
      }
    }, e -> {
      LogThrottle.Decision d = throttle.admit(LogThrottle.kind("ack", e));
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        LOG.warn("{} - could not acknowledge {} message(s) of {}: {}; their leases expire and they are redelivered",
            queen.nodeId(), acks.size(), where, Sql.describe(e));
      }
      inFlight.removeAll(heads);
      hints.settled(unit.partitions(), false); // the leases expire; the scan finds them then
    });
    return true;
  }

  /**
   * MessageHandler: run in order per partition, then acknowledge what ran in one call.
   *
   * <p>A failed message's partition stops there, and its lease is given back after the acknowledgement: a failure that dead-letters the message (no retries left) moves the cursor past it but
   * keeps the lease over the rest of the batch, which would otherwise wait, unhandled, for the lease to expire.
   */
  private boolean runEach(Map<Long, List<Message>> byPartition, List<Message> heads, Unit unit) {
    List<Broker.AckRequest> acks = new ArrayList<>();
    List<Message> giveBack = new ArrayList<>();
    List<Message> failedAt = new ArrayList<>();
    for (List<Message> part : byPartition.values()) {
      for (Message m : part) {
        if (stopping()) {
          giveBack.add(part.get(0));
          break;
        }
        long t0 = System.nanoTime();
        HandlerAcks.begin();
        try {
          one.handle(m);
          queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
          if (HandlerAcks.end().contains(m)) {
            count(acked, "acked", 1); // the handler's own commit acknowledged it (commit(connection) with ack(m))
          } else {
            acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
          }
          handled.incrementAndGet();
        } catch (DeadLetterException d) {
          queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
          acks.add(new Broker.AckRequest(m, AckStatus.DEAD_LETTER, describe(d))); // at once; the partition goes on
        } catch (Throwable t) {
          queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
          if (!running.get()) {
            giveBack.add(part.get(0)); // interrupted by close: not the message's fault
          } else {
            count(failed, "failed", 1);
            logFailure(m, t);
            acks.add(new Broker.AckRequest(m, AckStatus.FAILED, describe(t)));
            failedAt.add(m);
          }
          break; // the rest of this partition comes again after it
        }
      }
    }
    HandlerAcks.end(); // a handler that threw: whatever it committed, its failure is settled below
    if (giveBack.isEmpty() && !acks.isEmpty() && acks.stream().allMatch(a -> a.status() == AckStatus.COMPLETED)
        && settleAsync(acks, heads, unit)) {
      return true;
    }
    settle(acks);
    giveBack(giveBack);
    giveBack(failedAt);
    return false;
  }

  /** BatchHandler: one call for the batch, then acknowledge all of it or fail the heads. */
  private boolean runMany(List<Message> batch, List<Message> heads, Unit unit) {
    List<Broker.AckRequest> acks = new ArrayList<>(batch.size());
    long t0 = System.nanoTime();
    HandlerAcks.begin();
    try {
      many.handle(batch);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      Set<Message> ackedByHandler = HandlerAcks.end();
      for (Message m : batch) {
        if (ackedByHandler.contains(m)) {
          count(acked, "acked", 1); // the handler's own commit acknowledged it
        } else {
          acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
        }
      }
      handled.addAndGet(batch.size());
      if (acks.isEmpty()) {
        return false;
      }
    } catch (Throwable t) {
      HandlerAcks.end();
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      if (!running.get()) {
        giveBack(heads);
        return false;
      }
      failHeads(heads, batch.size(), t);
      return false;
    }
    if (settleAsync(acks, heads, unit)) {
      return true;
    }
    settle(acks);
    return false;
  }

  /**
   * OwnedBatchHandler: the handler commits and acknowledges by itself, or hands back what it completed, which
   * goes to the acker like a plain handler's completed unit (returns true then: the ack is in flight). When it
   * throws, the leases it still holds are given back without counting an attempt (the handler decides what is
   * an attempt).
   */
  private boolean runOwned(List<Message> batch, List<Message> heads, Unit unit) {
    long t0 = System.nanoTime();
    List<Message> done;
    try {
      done = owned.handle(batch);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      handled.addAndGet(batch.size());
    } catch (Throwable t) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      if (running.get()) {
        LOG.debug("{} - handler of {} gave its batch back: {}", queen.nodeId(), where, Sql.describe(t));
      }
      try {
        giveBack(heads); // a lease the handler completed is gone already; giving it back again changes nothing
      } catch (RuntimeException e) {
        LOG.debug("{} - could not give back the leases of {}: {}", queen.nodeId(), where, Sql.describe(e));
      }
      return false;
    }
    if (done == null || done.isEmpty()) {
      return false;
    }
    List<Broker.AckRequest> acks = new ArrayList<>(done.size());
    for (Message m : done) {
      acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
    }
    if (settleAsync(acks, heads, unit)) {
      return true;
    }
    settle(acks); // closing: acknowledged here and now
    return false;
  }

  /** What to do with the rest of a partition's batch after one message. */
  private enum Next {
    CONTINUE,
    STOP
  }

  /** TransactionalHandler: one bundle per message, in order; stop the partition at the first that does not commit. */
  private void runTxEach(List<Message> part, TransactionalHandler handler) {
    for (Message m : part) {
      if (stopping()) {
        giveBack(List.of(part.get(0)));
        return;
      }
      TransactionImpl tx = transactionOrNull();
      if (tx == null) {
        giveBack(List.of(part.get(0)));
        return;
      }
      try {
        if (runTx(m, part, handler, tx) == Next.STOP) {
          return;
        }
      } finally {
        tx.close(); // the handler's connection, if it took one, back to the pool
      }
    }
  }

  /** One message of {@link #runTxEach}: the handler, then its bundle with the ack. */
  private Next runTx(Message m, List<Message> part, TransactionalHandler handler, TransactionImpl tx) {
    long t0 = System.nanoTime();
    try {
      handler.handle(m, tx);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      handled.incrementAndGet();
    } catch (DeadLetterException d) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      tx.close(); // nothing of its bundle applies, the handler's statements included
      if (!settle(List.of(new Broker.AckRequest(m, AckStatus.DEAD_LETTER, describe(d))))) {
        return Next.STOP;
      }
      return Next.CONTINUE; // the partition goes on
    } catch (Throwable t) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      tx.close();
      if (!running.get()) {
        giveBack(List.of(part.get(0)));
      } else {
        fail(m, t);
      }
      return Next.STOP;
    }
    return commit(tx, List.of(m), List.of(part.get(0)));
  }

  /** A transaction for a handler, or null once the node has closed (a worker that outlived the grace period). */
  private TransactionImpl transactionOrNull() {
    try {
      TransactionImpl tx = queen.handlerTransaction();
      tx.onClose(() -> openTransactions.remove(tx));
      openTransactions.add(tx);
      return tx;
    } catch (BrokerClosedException e) {
      return null;
    }
  }

  /** TransactionalBatchHandler: one bundle for the batch and its acknowledgement. */
  private void runTxBatch(List<Message> batch, Map<Long, List<Message>> byPartition, List<Message> heads) {
    TransactionImpl tx = transactionOrNull();
    if (tx == null) {
      giveBack(heads);
      return;
    }
    try {
      runTxBatch(batch, byPartition, heads, tx);
    } finally {
      tx.close();
    }
  }

  private void runTxBatch(List<Message> batch, Map<Long, List<Message>> byPartition, List<Message> heads,
      TransactionImpl tx) {
    long t0 = System.nanoTime();
    try {
      txMany.handle(batch, tx);
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, true);
      handled.addAndGet(batch.size());
    } catch (Throwable t) {
      queen.broker().metrics().handled(request.queue(), request.group(), System.nanoTime() - t0, false);
      tx.close(); // nothing of its bundle applies, the handler's statements included
      if (!running.get()) {
        giveBack(heads);
      } else {
        failHeads(heads, batch.size(), t);
      }
      return;
    }
    CommitResult res = commitOrNull(tx, batch, heads);
    tx.close();
    if (res == null || res.success()) {
      return;
    }
    if (lostLease(res)) {
      // the partitions whose ack was refused belong to another consumer now (ALREADY_ACKED: it has finished the
      // message already); give the others back at once
      AckOutcome why = res.reason() == CommitResult.Reason.LEASE_LOST ? AckOutcome.LEASE_LOST : AckOutcome.ALREADY_ACKED;
      Set<Long> lost = new java.util.HashSet<>();
      for (AckResult a : res.acks()) {
        if (a.outcome() == why) {
          lost.add(a.partitionId());
        }
      }
      List<Message> keep = new ArrayList<>();
      for (Message h : heads) {
        if (lost.contains(h.partitionId())) {
          count(leaseLost, "lease_lost", byPartition.get(h.partitionId()).size());
        } else {
          keep.add(h);
        }
      }
      logLeaseLost(lost.size());
      giveBack(keep);
      return;
    }
    if (markerExists(res)) {
      // some message of the batch was done before; find out which, one message (and one bundle) at a time
      for (List<Message> part : byPartition.values()) {
        runTxEach(part, (m, t) -> txMany.handle(List.of(m), t));
      }
      return;
    }
    failHeads(heads, batch.size(), preconditionFailure(res));
  }

  /**
   * Adds the acknowledgement of {@code messages} to the handler's bundle, commits it, and acts on the
   * outcome. {@code heads} stand for the leases involved.
   */
  private Next commit(Transaction tx, List<Message> messages, List<Message> heads) {
    CommitResult res = commitOrNull(tx, messages, heads);
    if (res == null) {
      return Next.STOP;
    }
    if (res.success()) {
      return Next.CONTINUE;
    }
    if (lostLease(res)) {
      count(leaseLost, "lease_lost", messages.size());
      logLeaseLost(1);
      return Next.STOP;
    }
    if (markerExists(res)) {
      count(alreadyDone, "already_done", messages.size());
      List<Broker.AckRequest> acks = new ArrayList<>(messages.size());
      for (Message m : messages) {
        acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null));
      }
      return settle(acks, false) ? Next.CONTINUE : Next.STOP;
    }
    fail(messages.get(0), preconditionFailure(res));
    return Next.STOP;
  }

  /**
   * Commits a handler's bundle with the acknowledgement of {@code messages}. Returns the result, or
   * {@code null} when there is none to act on (the commit failed and was dealt with here).
   */
  private CommitResult commitOrNull(Transaction tx, List<Message> messages, List<Message> heads) {
    CommitResult res;
    try {
      try {
        tx.ack(messages);
      } catch (IllegalStateException committedByHandler) {
        // the handler committed the bundle itself: its effects are in, the ack is not; acknowledge alone
        if (warnedSelfCommit.compareAndSet(false, true)) {
          LOG.warn("{} - a transactional handler of {} committed its transaction itself; the loop commits it (with the"
              + " ack), so the effect and the ack were two commits", queen.nodeId(), where);
        }
        List<Broker.AckRequest> acks = new ArrayList<>(messages.size());
        messages.forEach(m -> acks.add(new Broker.AckRequest(m, AckStatus.COMPLETED, null)));
        settle(acks);
        return null;
      }
      res = tx.commit();
    } catch (QueenDatabaseException e) {
      if (!e.isTransient()) {
        failHeads(heads, messages.size(), e);
        return null;
      }
      // the database's trouble, not the message's (a lost connection, a full disk, no free connection): give the
      // leases back without blaming the message; on redelivery its marker tells whether this commit happened
      LogThrottle.Decision d = throttle.admit(LogThrottle.kind("commit", e));
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        LOG.warn("{} - commit of a bundle of {} failed ({}); its outcome is unknown, so the lease is given back and the"
            + " message redelivered", queen.nodeId(), where, Sql.describe(e));
      }
      giveBackPatiently(heads);
      return null;
    } catch (BrokerClosedException e) {
      // the node finished closing while this handler ran past the grace period: not the message's fault
      giveBack(heads);
      return null;
    } catch (RuntimeException e) {
      failHeads(heads, messages.size(), e);
      return null;
    }
    if (res.success()) {
      count(acked, "acked", messages.size());
      if (!warnedUnrequiredMarker.get()) {
        for (KvWriteResult w : res.writes()) {
          if (!w.applied() && w.reason() == KvReason.EXISTS && warnedUnrequiredMarker.compareAndSet(false, true)) {
            LOG.warn("{} - a transactional handler of {} committed its bundle although a putIfAbsent/once write found its"
                + " key already there: mark the marker write required() so that the bundle's effects apply only once",
                queen.nodeId(), where);
          }
        }
      }
    }
    return res;
  }

  /**
   * Whether the bundle came from a consumer that no longer holds the partition: its lease was refused, or another
   * consumer took the partition over and has already finished the message (the ack answered ALREADY_ACKED, and the
   * bundle's effects were kept out).
   */
  private static boolean lostLease(CommitResult res) {
    return res.reason() == CommitResult.Reason.LEASE_LOST || res.reason() == CommitResult.Reason.ALREADY_ACKED;
  }

  private static boolean markerExists(CommitResult res) {
    return res.reason() == CommitResult.Reason.KV_PRECONDITION && !res.writes().isEmpty()
        && res.writes().get(res.writes().size() - 1).reason() == KvReason.EXISTS;
  }

  private static IllegalStateException preconditionFailure(CommitResult res) {
    KvWriteResult w = res.writes().isEmpty() ? null : res.writes().get(res.writes().size() - 1);
    return new IllegalStateException("a required KV write of the bundle was not applied (operation "
        + res.failedOperation() + (w != null ? ", reason " + w.reason() : "") + ")");
  }

  private void logLeaseLost(int partitions) {
    LogThrottle.Decision d = throttle.admit("lease-lost");
    if (d.level() != LogThrottle.Level.SUPPRESS) {
      LOG.warn("{} - {}: the lease of {} partition(s) expired or was taken over before the bundle committed; nothing of"
          + " it was applied and another consumer has those messages (handlers slower than the lease time?)",
          queen.nodeId(), where, partitions);
    }
  }

  // --------------------------------------------------------------------------- acks and failures

  /** Fails one message (attempt counted). */
  private void fail(Message m, Throwable t) {
    count(failed, "failed", 1);
    logFailure(m, t);
    settle(List.of(new Broker.AckRequest(m, AckStatus.FAILED, describe(t))));
    giveBack(List.of(m)); // a dead-lettering failure keeps the lease over the rest of the batch (see runEach)
  }

  /**
   * Fails the first message of each partition (the rest comes again with it). The log names the batch: a batch
   * handler's exception does not say which of its messages it came from.
   */
  private void failHeads(List<Message> heads, int batchSize, Throwable t) {
    count(failed, "failed", 1);
    logFailure(batchSize <= 1 ? at(heads.get(0)) : "a batch of " + batchSize + " messages from " + heads.size()
        + " partition(s), the first at " + at(heads.get(0)), t);
    List<Broker.AckRequest> acks = new ArrayList<>(heads.size());
    for (Message h : heads) {
      acks.add(new Broker.AckRequest(h, AckStatus.FAILED, describe(t)));
    }
    settle(acks);
    giveBack(heads); // a dead-lettering failure keeps the lease over the rest of the batch (see runEach)
  }

  /**
   * Sends acknowledgements and counts their outcomes. Returns false when a lease was found lost. A
   * failure to send is logged; the leases then expire and the messages come again.
   */
  private boolean settle(List<Broker.AckRequest> acks) {
    return settle(acks, true);
  }

  /** @param countAcked whether completed acknowledgements count in {@link #acked()} */
  private boolean settle(List<Broker.AckRequest> acks, boolean countAcked) {
    if (acks.isEmpty()) {
      return true;
    }
    Thread.interrupted(); // an interrupt aimed at the handler must not fail the acknowledgement
    List<AckResult> res;
    try {
      AckCoalescer a = acker;
      res = a != null ? a.ack(acks) : queen.broker().ack(acks, true);
    } catch (RuntimeException e) {
      LogThrottle.Decision d = throttle.admit(LogThrottle.kind("ack", e));
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        LOG.warn("{} - could not acknowledge {} message(s) of {}: {}; their leases expire and they are redelivered",
            queen.nodeId(), acks.size(), where, Sql.describe(e));
      }
      return false;
    }
    return count(res, countAcked);
  }

  /** Counts acknowledgement outcomes (completed ones as acked); returns false when a lease was found lost. */
  private boolean count(List<AckResult> res) {
    return count(res, true);
  }

  private boolean count(List<AckResult> res, boolean countAcked) {
    long lost = 0;
    for (AckResult r : res) {
      switch (r.outcome()) {
        case LEASE_LOST -> lost++;
        case DEAD_LETTERED -> count(deadLettered, "dead_lettered", 1);
        case RETRY_SCHEDULED, REDELIVER -> { }
        default -> {
          if (countAcked) {
            count(acked, "acked", 1);
          }
        }
      }
    }
    if (lost > 0) {
      count(leaseLost, "lease_lost", lost);
      LogThrottle.Decision d = throttle.admit("ack-lease-lost");
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        LOG.warn("{} - {} acknowledgement(s) of {} rejected: the lease expired or was taken over (handlers slower than"
            + " the lease time?); those messages are redelivered to the new holder", queen.nodeId(), lost, where);
      }
    }
    return lost == 0;
  }

  private void giveBack(List<Message> heads) {
    if (heads.isEmpty()) {
      return;
    }
    try {
      queen.broker().release(heads);
    } catch (RuntimeException e) {
      if (running.get()) { // (closing: close gives back what is left)
        LOG.warn("{} - could not give back {} lease(s) of {}: {}; they expire after the lease time", queen.nodeId(),
            heads.size(), where, Sql.describe(e));
      }
    }
  }

  /**
   * Gives the leases back after a transient failure, tried again while the database does not answer for up to the
   * lease time ({@link Patiently}), so an outage shorter than the lease costs the message no attempt. Stops trying when
   * the subscription closes (close gives back what is left).
   */
  private void giveBackPatiently(List<Message> heads) {
    if (heads.isEmpty()) {
      return;
    }
    try {
      Patiently.call(lease, running::get,
          e -> {
            if (throttle.admit(LogThrottle.kind("give-back", e)).level() != LogThrottle.Level.SUPPRESS) {
              LOG.warn("{} - could not give back {} lease(s) of {} ({}); trying again while the database does not"
                  + " answer, for up to the lease time", queen.nodeId(), heads.size(), where, Sql.describe(e));
            }
          },
          tries -> LOG.info("{} - gave back {} lease(s) of {} after {} tries", queen.nodeId(), heads.size(), where,
              tries),
          () -> {
            queen.broker().release(heads);
            return null;
          });
    } catch (RuntimeException e) {
      if (running.get()) { // (closing: close gives back what is left)
        LOG.warn("{} - could not give back {} lease(s) of {}: {}; they expire after the lease time", queen.nodeId(),
            heads.size(), where, Sql.describe(e));
      }
    }
  }

  private boolean stopping() {
    return !running.get() && Thread.currentThread().isInterrupted();
  }

  /**
   * WARN once per failed message and attempt, with the exception; identical repeats within a minute are
   * logged without the stack trace, and past ten, only counted.
   */
  private void logFailure(Message m, Throwable t) {
    logFailure(at(m), t);
  }

  private static String at(Message m) {
    return "partition '" + m.partition() + "' offset " + m.offset() + " attempt " + m.attempt();
  }

  private void logFailure(String at, Throwable t) {
    LogThrottle.Decision d = throttle.admit(LogThrottle.kind("handler", t));
    if (d.suppressedBefore() > 0) {
      LOG.warn("{} - handler of {}: {} identical failure(s) were not logged in the previous minute", queen.nodeId(),
          where, d.suppressedBefore());
    }
    switch (d.level()) {
      case FULL -> LOG.warn("{} - handler of {} failed on {}", queen.nodeId(), where, at, Sql.forLog(t));
      case SHORT -> LOG.warn("{} - handler of {} failed on {}: {} (repeated failure, stack trace above)", queen.nodeId(),
          where, at, Sql.forLog(t).toString());
      case SUPPRESS -> LOG.debug("{} - handler of {} failed on {}: {}", queen.nodeId(), where, at, Sql.forLog(t).toString());
    }
  }

  /** The error kept with a failed or dead-lettered message: the handler's message, JDBC detail lines removed. */
  private static String describe(Throwable t) {
    return Sql.errorText(t);
  }

  private void renewLeases() {
    if (inFlight.isEmpty()) {
      return;
    }
    try {
      queen.broker().renew(new ArrayList<>(inFlight));
    } catch (RuntimeException e) {
      LogThrottle.Decision d = throttle.admit(LogThrottle.kind("renew", e));
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        LOG.warn("{} - lease renewal for {} failed: {}", queen.nodeId(), where, Sql.describe(e));
      }
    }
  }

  // --------------------------------------------------------------------------------------- close

  @Override
  public void close() {
    close(defaultGrace);
  }

  @Override
  public void close(Duration grace) {
    checkGrace(grace);
    if (beginClose()) {
      long deadline = System.nanoTime() + grace.toNanos();
      if (onOwnThread()) {
        // called by one of this subscription's handlers: waiting here would wait for itself, and giving its lease
        // back would fence its own ack; the rest of the close runs once the handler has returned
        queen.newDaemon("closer", () -> finishClose(deadline)).start();
        return;
      }
      finishClose(deadline);
    }
  }

  /** The grace period's rule, for the builder and for {@code Subscription.close(Duration)}. */
  static Duration checkGrace(Duration g) {
    Objects.requireNonNull(g, "gracePeriod must not be null");
    if (g.isNegative() || g.compareTo(Duration.ofMinutes(10)) > 0) {
      throw new IllegalArgumentException("gracePeriod must be between 0 and PT10M, was " + g);
    }
    return g;
  }

  @Override
  public boolean onOwnThread() {
    Thread t = Thread.currentThread();
    return t == claimer || workers.contains(t);
  }

  /**
   * The first half of a close: no more pops, and every worker stops after the unit it runs. Returns false when
   * the subscription was closing already. The node's close calls this on every subscription before it waits for
   * any, so all of them stop taking work at once and their handlers share one grace period.
   */
  @Override
  public boolean beginClose() {
    synchronized (lifecycle) {
      return beginCloseLocked();
    }
  }

  private boolean beginCloseLocked() {
    if (!closed.compareAndSet(false, true)) {
      return false;
    }
    running.set(false);
    queen.wakeups().removeListener(request.queue(), onWake);
    nudge();
    for (int i = 0; i < workers.size(); i++) {
      units.add(STOP);
    }
    return true;
  }

  /**
   * The second half: waits for the claimer and the workers until {@code deadline} ({@link System#nanoTime()}),
   * interrupts what still runs, and gives back every lease left.
   */
  @Override
  public void finishClose(long deadline) {
    boolean interrupted = false;
    Thread c = claimer;
    if (c != null) {
      try {
        c.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
      } catch (InterruptedException e) {
        interrupted = true;
      }
      if (c.isAlive()) {
        c.interrupt(); // a pop in flight returns; what it took is given back below
      }
    }
    for (Thread t : workers) {
      long left = deadline - System.nanoTime();
      try {
        t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    // past the grace period: interrupt what still runs, and end the transactions of transactional handlers still
    // running (their connections are aborted, so nothing of their bundle or their own statements can commit); then
    // wait at most CLOSE_MARGIN_MS more, for all of them together
    for (Thread t : workers) {
      if (t.isAlive()) {
        t.interrupt();
      }
    }
    for (TransactionImpl tx : List.copyOf(openTransactions)) {
      tx.abort();
    }
    long marginEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_MARGIN_MS);
    List<Thread> waitedFor = new ArrayList<>(workers);
    if (c != null) {
      waitedFor.add(c);
    }
    for (Thread t : waitedFor) {
      try {
        t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(marginEnd - System.nanoTime())));
      } catch (InterruptedException e) {
        interrupted = true;
      }
      if (t.isAlive()) {
        LOG.warn("{} - {} did not stop within the grace period and an interrupt; its lease is given back, so its"
            + " message can be delivered again while it still runs", queen.nodeId(), t.getName());
      }
    }
    AckCoalescer a = acker;
    if (a != null) {
      a.close(); // the workers have their answers; nothing is waiting in it
    }
    ScheduledFuture<?> r = renewal;
    if (r != null) {
      r.cancel(false);
    }
    if (!inFlight.isEmpty()) {
      try {
        queen.broker().release(new ArrayList<>(inFlight));
      } catch (RuntimeException e) {
        LOG.warn("{} - could not release leases on close: {}", queen.nodeId(), Sql.describe(e));
      }
    }
    queen.unregister(this);
    throttle.drainSuppressed().forEach((kind, n) -> LOG.warn("{} - {}: {} more event(s) of one kind were not logged in"
        + " the last minute ({})", queen.nodeId(), where, n, kind.substring(kind.indexOf('|') + 1)));
    if (owned != null) {
      // a connector's loop: the connector acknowledges the batches it dead-letters or fails in its own transaction,
      // so the loop's counts are not the messages' outcomes; the connector's status has those
      LOG.info("{} - stopped consuming {}: {} delivery(ies) handed to its connector, {} acknowledged by the loop"
          + " (the connector's status counts what it applied, skipped and dead-lettered)", queen.nodeId(), where,
          handled.get(), acked.get());
    } else {
      LOG.info("{} - stopped consuming {}: {} handled, {} acked, {} already done, {} failed, {} dead-lettered, {}"
          + " lease(s) lost", queen.nodeId(), where, handled.get(), acked.get(), alreadyDone.get(), failed.get(),
          deadLettered.get(), leaseLost.get());
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
