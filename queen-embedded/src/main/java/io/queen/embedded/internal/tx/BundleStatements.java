package io.queen.embedded.internal.tx;

import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.CommitResult;
import io.queen.KvWriteResult;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.PushStatus;
import io.queen.embedded.internal.kv.KvStore;
import io.queen.embedded.internal.kv.KvWrite;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.tx.Op.AckOp;
import io.queen.embedded.internal.tx.Op.GetManyOp;
import io.queen.embedded.internal.tx.Op.GetOp;
import io.queen.embedded.internal.tx.Op.PushOp;
import io.queen.embedded.internal.tx.Op.WriteOp;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Runs a bundle's operations on a connection, in the order they were added: one statement per KV operation and one
 * per run of consecutive pushes or acks, or, for KV writes followed by acks under leases, one call of
 * {@code bundle_kv_ack_fenced}. Decides when an ack fails the bundle (a lost lease; a message another consumer
 * finished while the bundle has effects). Does not commit or roll back: {@link TransactionImpl} owns the transaction.
 * Confined to the committing thread.
 */
final class BundleStatements {
  private final Broker broker;
  private final KvStore store;
  /** The bundle's operations, as {@link TransactionImpl} records them (read at commit only). */
  private final List<Op> ops;

  BundleStatements(Broker broker, KvStore store, List<Op> ops) {
    this.broker = broker;
    this.store = store;
    this.ops = ops;
  }

  /**
   * Whether the bundle is KV writes followed by acks under leases (once() per message + ack of the
   * batch): then it runs as one auto-commit call of {@code bundle_kv_ack_fenced}, which undoes itself when a
   * required write or a lease fails.
   */
  boolean kvThenAcks() {
    int i = 0;
    while (i < ops.size() && ops.get(i) instanceof WriteOp) {
      i++;
    }
    if (i == 0 || i == ops.size()) {
      return false;
    }
    for (int j = i; j < ops.size(); j++) {
      if (!(ops.get(j) instanceof AckOp a) || a.acks().stream().anyMatch(r -> r.message().leaseId() == null)) {
        return false;
      }
    }
    return true;
  }

  Run applyKvThenAcks(Connection c) throws SQLException {
    List<KvWrite> writes = new ArrayList<>();
    int w = 0;
    while (ops.get(w) instanceof WriteOp op) {
      writes.add(op.write());
      w++;
    }
    List<Broker.AckRequest> acks = new ArrayList<>();
    List<Integer> owner = new ArrayList<>();
    for (int j = w; j < ops.size(); j++) {
      for (Broker.AckRequest r : ((AckOp) ops.get(j)).acks()) {
        acks.add(r);
        owner.add(j);
      }
    }
    KvStore.BundleResult b = null;
    if (!acks.isEmpty() && writes.stream().allMatch(x -> x.op() == KvWrite.Op.PUT_IF_ABSENT)) {
      b = store.markersThenAck(c, writes, acks); // null: it did not apply, and the general call says why
      broker.metrics().markerStatement(b != null);
    }
    if (b == null) {
      b = store.writeThenAck(c, writes, acks);
    }
    Run run = new Run();
    run.writes.addAll(b.writes());
    run.acks.addAll(b.acks());
    if ("kv".equals(b.fail())) {
      KvWriteResult r = b.writes().get(b.writes().size() - 1);
      run.failure = new CommitResult(false, CommitResult.Reason.KV_PRECONDITION, b.writes().size() - 1, r.value(),
          r.version(), List.of(), List.of(), List.of(r), List.of());
    } else if ("lease".equals(b.fail()) || "done".equals(b.fail())) {
      // "done": an ack found its message acknowledged before the bundle; the writes were undone with it
      AckOutcome why = "lease".equals(b.fail()) ? AckOutcome.LEASE_LOST : AckOutcome.ALREADY_ACKED;
      int failed = -1;
      for (int k = 0; k < b.acks().size() && failed < 0; k++) {
        if (b.acks().get(k).outcome() == why) {
          failed = owner.get(k);
        }
      }
      run.failure = ackFailure(why, failed, b.acks(), owner);
    }
    return run;
  }

  /** The failure of a bundle whose ack op {@code failed} answered {@code why}, with that op's results. */
  private static CommitResult ackFailure(AckOutcome why, int failed, List<AckResult> results, List<Integer> owner) {
    List<AckResult> mine = new ArrayList<>();
    for (int k = 0; k < results.size(); k++) {
      if (owner.get(k) == failed) {
        mine.add(results.get(k));
      }
    }
    return new CommitResult(false, why == AckOutcome.LEASE_LOST ? CommitResult.Reason.LEASE_LOST
        : CommitResult.Reason.ALREADY_ACKED, failed, null, 0, List.of(), List.copyOf(mine), List.of(), List.of());
  }

  /** Whether the bundle pushes or writes: then an ack of a message another consumer finished fails the bundle. */
  private boolean hasEffects() {
    for (Op op : ops) {
      if (op instanceof PushOp || op instanceof WriteOp) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether the message of ack {@code k} (answered ALREADY_ACKED) was finished by another consumer: its lease no longer
   * holds the partition, and this call acknowledged nothing of the partition under that lease (which would have
   * released it by completing the leased range). Under the caller's own live lease an ALREADY_ACKED is a message it
   * acknowledged on its own before: a success that changes nothing, as for an ack alone.
   */
  private boolean finishedByAnother(Connection c, List<Broker.AckRequest> all, List<AckResult> results, int k)
      throws SQLException {
    Message m = all.get(k).message();
    if (m.leaseId() == null) {
      return false;
    }
    for (int j = 0; j < results.size(); j++) {
      Message o = all.get(j).message();
      if (results.get(j).outcome() == AckOutcome.ACKED && o.partitionId() == m.partitionId()
          && m.consumerGroup().equals(o.consumerGroup()) && m.leaseId().equals(o.leaseId())) {
        return false;
      }
    }
    try (java.sql.PreparedStatement st = c.prepareStatement("select 1 from " + broker.schema() + ".cursors"
        + " where partition_id = ? and group_name = ? and lease_id = ?")) {
      st.setLong(1, m.partitionId());
      st.setString(2, m.consumerGroup());
      st.setObject(3, m.leaseId());
      try (java.sql.ResultSet rs = st.executeQuery()) {
        return !rs.next();
      }
    }
  }

  private static String ackKey(Broker.AckRequest r) {
    Message m = r.message();
    return m.consumerGroup() + '\0' + m.partitionId() + '\0' + m.offset();
  }

  /** Runs the operations in order on {@code c}; stops at the first that fails the bundle. Does not roll back. */
  Run apply(Connection c, boolean notifyInTransaction) throws SQLException {
    Run run = new Run();
    // joined to the caller's transaction (commit(Connection)), the caller's own work is an effect too
    boolean effects = notifyInTransaction || hasEffects();
    Set<String> ackedHere = new HashSet<>();
    int i = 0;
    while (i < ops.size() && run.failure == null) {
      Op op = ops.get(i);
      if (op instanceof PushOp) {
        int end = i;
        List<PushItem> items = new ArrayList<>();
        List<String> payloads = new ArrayList<>();
        while (end < ops.size() && ops.get(end) instanceof PushOp p) {
          items.add(p.item());
          payloads.add(p.payloadJson());
          end++;
        }
        for (PushResult r : broker.pushes().push(c, items, payloads, notifyInTransaction)) {
          run.pushes.add(new PushResult(run.pushes.size(), r.queue(), r.partition(), r.status(), r.messageId(), r.offset(),
              r.transactionId()));
          if (r.status() == PushStatus.QUEUED) {
            run.partitions.computeIfAbsent(r.queue(), k -> new LinkedHashSet<>()).add(r.partition());
          }
        }
        i = end;
      } else if (op instanceof AckOp) {
        int end = i;
        List<Broker.AckRequest> all = new ArrayList<>();
        List<Integer> owner = new ArrayList<>(); // op index of each request
        while (end < ops.size() && ops.get(end) instanceof AckOp a) {
          for (Broker.AckRequest r : a.acks()) {
            all.add(r);
            owner.add(end);
          }
          end++;
        }
        List<AckResult> results = all.isEmpty() ? List.of() : broker.ack(c, all);
        for (int k = 0; k < results.size() && run.failure == null; k++) {
          if (results.get(k).outcome() == AckOutcome.LEASE_LOST) {
            run.failure = ackFailure(AckOutcome.LEASE_LOST, owner.get(k), results, owner);
          }
        }
        for (int k = 0; k < results.size() && run.failure == null; k++) {
          // acknowledged before this bundle by another consumer that took the partition over: its pushes and writes
          // would repeat that consumer's effects (bundle_kv_ack_fenced applies the same rule in SQL)
          boolean first = ackedHere.add(ackKey(all.get(k)));
          if (effects && first && results.get(k).outcome() == AckOutcome.ALREADY_ACKED
              && finishedByAnother(c, all, results, k)) {
            run.failure = ackFailure(AckOutcome.ALREADY_ACKED, owner.get(k), results, owner);
          }
        }
        run.acks.addAll(results);
        i = end;
      } else if (op instanceof WriteOp) {
        // a run of consecutive writes goes in one call; it stops at the first required write that fails
        int end = i;
        List<KvWrite> writes = new ArrayList<>();
        while (end < ops.size() && ops.get(end) instanceof WriteOp w) {
          writes.add(w.write());
          end++;
        }
        List<KvWriteResult> results = store.writeMany(c, writes);
        for (int k = 0; k < results.size(); k++) {
          KvWriteResult r = results.get(k);
          if (!r.applied() && writes.get(k).required()) {
            run.failure = new CommitResult(false, CommitResult.Reason.KV_PRECONDITION, i + k, r.value(), r.version(),
                List.of(), List.of(), List.of(r), List.of());
          }
          run.writes.add(r);
        }
        i = end;
      } else if (op instanceof GetOp g) {
        run.reads.add(store.get(c, g.namespace(), g.key()));
        i++;
      } else if (op instanceof GetManyOp g) {
        run.reads.addAll(store.getMany(c, g.namespace(), g.keys()));
        i++;
      } else {
        throw new IllegalStateException("unknown operation " + op);
      }
    }
    return run;
  }
}
