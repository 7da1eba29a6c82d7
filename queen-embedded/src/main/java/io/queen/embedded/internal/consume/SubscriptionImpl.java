package io.queen.embedded.internal.consume;

import io.queen.AckOutcome;
import io.queen.BatchHandler;
import io.queen.Message;
import io.queen.MessageHandler;
import io.queen.Queen;
import io.queen.TransactionalBatchHandler;
import io.queen.TransactionalHandler;
import io.queen.embedded.internal.db.LogThrottle;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
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
 *
 * <p>The handler shapes run in {@link HandlerUnits} and {@link TransactionalUnits}, and a unit ends through
 * {@link Settlement}. What stays here (over 600 lines) is what the subscription's threads share: the claimer hands
 * units to the workers, the workers count themselves idle and nudge it, the close stops both and renewals run beside
 * them; that hand-off and its ordering rules stay in one file, so that they read in one place.
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
  /** Leases held by running batches: one message per (partition, lease) stands for the lease. */
  private final Set<Message> inFlight = ConcurrentHashMap.newKeySet();
  /** How long a close waits, past its grace period and the interrupt, for every thread of the subscription. */
  static final long CLOSE_MARGIN_MS = 500;
  /** When rounds started failing (System.nanoTime), or 0 while they succeed; shared by the workers. */
  private final AtomicLong failingSince = new AtomicLong();
  private final AtomicLong failedRounds = new AtomicLong();
  /** Acknowledgements, failures, give-backs and their counts. */
  private final Settlement outcomes;
  /** The units of a plain handler. */
  private final HandlerUnits plain;
  /** The units of a transactional handler. */
  private final TransactionalUnits transactional;
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
    this.outcomes = new Settlement(LOG, queen.broker(), queen.nodeId(), request.queue(), request.group(), where,
        () -> acker, running::get, () -> lease);
    this.plain = new HandlerUnits(LOG, queen, request, where, one, many, owned, outcomes, running::get);
    this.transactional = new TransactionalUnits(LOG, queen, request, where, txMany, outcomes, running::get);
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
    return outcomes.handled.get();
  }

  @Override
  public long failed() {
    return outcomes.failed.get();
  }

  @Override
  public long acked() {
    return outcomes.acked.get();
  }

  @Override
  public long alreadyDone() {
    return outcomes.alreadyDone.get();
  }

  @Override
  public long deadLettered() {
    return outcomes.deadLettered.get();
  }

  @Override
  public long leaseLost() {
    return outcomes.leaseLost.get();
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
      long failures = outcomes.failed.get() + outcomes.leaseLost.get();
      boolean ackInFlight = runBatch(unit);
      // with the ack in flight the partition is still leased: the acker nudges the claimer when it is not
      mayHaveMore = !ackInFlight
          && hints.settled(unit.partitions(),
              outcomes.failed.get() + outcomes.leaseLost.get() != failures || unit.mayBeCut());
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
        async = plain.runEach(byPartition, acks -> settleAsync(acks, heads, unit));
      } else if (many != null) {
        async = plain.runMany(batch, heads, acks -> settleAsync(acks, heads, unit));
      } else if (owned != null) {
        async = plain.runOwned(batch, heads, acks -> settleAsync(acks, heads, unit));
      } else if (txOne != null) {
        for (List<Message> part : byPartition.values()) {
          transactional.runTxEach(part, txOne);
        }
      } else {
        transactional.runTxBatch(batch, byPartition, heads);
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
      outcomes.count(res);
      inFlight.removeAll(heads);
      if (hints.settled(unit.partitions(), unit.mayBeCut() || res.stream()
          .anyMatch(r -> r.outcome() != AckOutcome.ACKED && r.outcome() != AckOutcome.ALREADY_ACKED))) {
        nudge();
      }
    }, e -> {
      LogThrottle.Decision d = outcomes.throttle.admit(LogThrottle.kind("ack", e));
      if (d.level() != LogThrottle.Level.SUPPRESS) {
        LOG.warn("{} - could not acknowledge {} message(s) of {}: {}; their leases expire and they are redelivered",
            queen.nodeId(), acks.size(), where, Sql.describe(e));
      }
      inFlight.removeAll(heads);
      hints.settled(unit.partitions(), false); // the leases expire; the scan finds them then
    });
    return true;
  }

  private void renewLeases() {
    if (inFlight.isEmpty()) {
      return;
    }
    try {
      queen.broker().renew(new ArrayList<>(inFlight));
    } catch (RuntimeException e) {
      LogThrottle.Decision d = outcomes.throttle.admit(LogThrottle.kind("renew", e));
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
    for (TransactionImpl tx : List.copyOf(transactional.openTransactions())) {
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
    outcomes.throttle.drainSuppressed().forEach((kind, n) -> LOG.warn("{} - {}: {} more event(s) of one kind were not"
        + " logged in the last minute ({})", queen.nodeId(), where, n, kind.substring(kind.indexOf('|') + 1)));
    if (owned != null) {
      // a connector's loop: the connector acknowledges the batches it dead-letters or fails in its own transaction,
      // so the loop's counts are not the messages' outcomes; the connector's status has those
      LOG.info("{} - stopped consuming {}: {} delivery(ies) handed to its connector, {} acknowledged by the loop"
          + " (the connector's status counts what it applied, skipped and dead-lettered)", queen.nodeId(), where,
          outcomes.handled.get(), outcomes.acked.get());
    } else {
      LOG.info("{} - stopped consuming {}: {} handled, {} acked, {} already done, {} failed, {} dead-lettered, {}"
          + " lease(s) lost", queen.nodeId(), where, outcomes.handled.get(), outcomes.acked.get(),
          outcomes.alreadyDone.get(), outcomes.failed.get(), outcomes.deadLettered.get(), outcomes.leaseLost.get());
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
