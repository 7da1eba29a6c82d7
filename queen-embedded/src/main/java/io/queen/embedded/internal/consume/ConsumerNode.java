package io.queen.embedded.internal.consume;

import io.queen.Transaction;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.Wakeups;
import io.queen.embedded.internal.tx.TransactionImpl;
import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;

/**
 * What the consume loop needs from the node it runs on: its log, wake-ups and threads, and the registration that
 * lets the node's close stop every subscription first. The node implements it; nothing else does.
 */
public interface ConsumerNode {

  String nodeId();

  /** The bound on how long a waiting pop sleeps between polls. */
  Duration pollInterval();

  /** The grace period a close gives running handlers. */
  Duration closeGrace();

  Broker broker();

  Wakeups wakeups();

  /** The node's scheduler (lease renewals); its tasks must not block. */
  ScheduledExecutorService scheduler();

  /** A daemon thread named after the node and the role. */
  Thread newDaemon(String role, Runnable r);

  /** A consumer worker thread, from the application's thread factory when it gave one. */
  Thread newThread(String role, Runnable r);

  /** A transaction bundle on this node. */
  Transaction transaction();

  /**
   * The bundle a transactional handler gets: its {@code connection()} may be taken, and the caller closes it once the
   * handler's message is settled.
   */
  TransactionImpl handlerTransaction();

  /** Throws {@code BrokerClosedException} once the node is closed. */
  void checkOpen();

  /** True once the node's close has started. */
  boolean isClosing();

  /** A started subscription, closed with the node. */
  void register(RunningSubscription s);

  void unregister(RunningSubscription s);
}
