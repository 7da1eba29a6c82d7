package io.queen.embedded.internal.log;

import io.queen.PushItem;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * A push's arrays, in request order: every item has a message id made here and a transaction id (the
 * caller's, or the text of the message id); {@code callerIds} when any item brought its own. Made by
 * {@link Pusher}; {@link PartitionLanes} combines the batches of calls waiting for one partition.
 */
record PushBatch(String[] queues, String[] partitions, String[] payloads, String[] txnIds, String[] traceIds,
    UUID[] ids, boolean callerIds, List<PushItem> items, String[] types, Integer[] versions, String[] keyIds) {
  /** The partitions pushed to, queue by queue. */
  Map<String, Set<String>> partitionsByQueue() {
    Map<String, Set<String>> out = new java.util.HashMap<>();
    for (int i = 0; i < queues.length; i++) {
      out.computeIfAbsent(queues[i], q -> new java.util.HashSet<>()).add(partitions[i]);
    }
    return out;
  }

  /** Whether every item names the same queue and partition (and none brings its own transaction id). */
  boolean onePartition() {
    for (int i = 1; i < queues.length; i++) {
      if (!queues[i].equals(queues[0]) || !partitions[i].equals(partitions[0])) {
        return false;
      }
    }
    return !callerIds;
  }

  /** The items of several prepared pushes as one, in order. */
  static PushBatch concat(List<PushBatch> parts) {
    int n = 0;
    boolean typed = false;
    boolean sealed = false;
    for (PushBatch p : parts) {
      n += p.queues.length;
      typed |= p.types != null;
      sealed |= p.keyIds != null;
    }
    String[] qs = new String[n];
    String[] ps = new String[n];
    String[] pl = new String[n];
    String[] tx = new String[n];
    String[] tr = new String[n];
    UUID[] ids = new UUID[n];
    String[] ty = typed ? new String[n] : null;
    Integer[] ve = typed ? new Integer[n] : null;
    String[] kid = sealed ? new String[n] : null;
    List<PushItem> items = new ArrayList<>(n);
    boolean callerIds = false;
    int at = 0;
    for (PushBatch p : parts) {
      int k = p.queues.length;
      System.arraycopy(p.queues, 0, qs, at, k);
      System.arraycopy(p.partitions, 0, ps, at, k);
      System.arraycopy(p.payloads, 0, pl, at, k);
      System.arraycopy(p.txnIds, 0, tx, at, k);
      System.arraycopy(p.traceIds, 0, tr, at, k);
      System.arraycopy(p.ids, 0, ids, at, k);
      if (p.types != null) {
        System.arraycopy(p.types, 0, ty, at, k);
        System.arraycopy(p.versions, 0, ve, at, k);
      }
      if (p.keyIds != null) {
        System.arraycopy(p.keyIds, 0, kid, at, k);
      }
      items.addAll(p.items);
      callerIds |= p.callerIds;
      at += k;
    }
    return new PushBatch(qs, ps, pl, tx, tr, ids, callerIds, items, ty, ve, kid);
  }

  /** The items with their queue, partition and transaction id filled in, for a retry by the caller. */
  List<PushItem> itemsWithIds() {
    List<PushItem> out = new ArrayList<>(items.size());
    for (int i = 0; i < items.size(); i++) {
      PushItem it = items.get(i);
      out.add(new PushItem(queues[i], partitions[i], it.payload(), txnIds[i], it.traceId()));
    }
    return out;
  }
}
