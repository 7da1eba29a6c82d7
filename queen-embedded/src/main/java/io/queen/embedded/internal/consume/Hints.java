package io.queen.embedded.internal.consume;

import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/**
 * What the claimer of one subscription pops next: the partitions it was told of, or a scan of the group's flagged
 * cursors.
 *
 * <p>A push of this node, or another node's notification, names the partitions that got messages; the claimer pops
 * those (a look-up each) instead of scanning. A partition a unit of this subscription holds is not popped while it
 * runs: a push into it waits here until the unit is settled, and comes back then (after a wake-up that named nothing,
 * every held partition comes back so). The claimer scans when a wake-up named nothing, when a scan took as much as it
 * could (more may be ready), when the names are many more than the pop may take, and at least once per poll interval:
 * what no push names (a retry that is due, a lease that expired, a notification that was lost) is found by the scan.
 *
 * <p>Thread-safe: pushes, workers, the acker and the claimer all call in.
 */
final class Hints {
  /** Most names one pop takes (a pop with more scans instead). */
  static final int MAX_NAMED = 1000;
  /** Names a pop may look up beyond the partitions it may take (those it cannot take stay for the next pop). */
  static final int SLACK = 64;

  private final boolean scanOnly;
  private final Set<String> ready = new LinkedHashSet<>();
  /** Partitions held by units of this subscription, with how many units hold each. */
  private final Map<String, Integer> held = new HashMap<>();
  /** Partitions named while held: ready again when the last unit holding them is settled. */
  private final Set<String> deferred = new HashSet<>();
  private boolean scanDue = true;
  private long lastScan;

  /** @param scanOnly a subscription pinned to one partition pops it by name every time: nothing to name */
  Hints(boolean scanOnly) {
    this.scanOnly = scanOnly;
  }

  /**
   * A wake-up: the partitions that got messages, or null when not known. Not known: the next pop scans, and every
   * partition a unit holds counts as named while held (the scan passes leased partitions, and a push into one of them
   * would otherwise wait for the scan of the next poll interval after its unit is settled).
   */
  synchronized void woken(Collection<String> partitions) {
    if (scanOnly) {
      scanDue = true;
      return;
    }
    if (partitions == null) {
      scanDue = true;
      deferred.addAll(held.keySet());
      return;
    }
    for (String p : partitions) {
      if (held.containsKey(p)) {
        deferred.add(p);
      } else {
        ready.add(p);
      }
    }
    if (ready.size() > MAX_NAMED) {
      ready.clear();
      scanDue = true;
    }
  }

  /**
   * The names for the next pop, or null when it should scan, or an empty array when there is nothing to pop until a
   * wake-up or the poll interval. {@code partitions}: the most partitions the pop may take. A pop looks every name up,
   * so with many more names than it may take (a push of one item into each of 1,000 partitions, and four idle workers)
   * each pop would look up the names the pops before it left, again; a scan costs what the pop takes instead, and finds
   * the named partitions by their flags. So past {@link #SLACK} names more than that, the pop scans, and the scans go
   * on while they take all they can.
   */
  synchronized String[] next(long now, long pollNanos, int partitions) {
    if (ready.size() > partitions + SLACK) {
      ready.clear();
      scanDue = true;
    }
    if (scanDue || now - lastScan >= pollNanos || scanOnly) {
      scanDue = false;
      lastScan = now;
      return null;
    }
    String[] names = ready.toArray(new String[0]);
    ready.clear();
    return names;
  }

  /**
   * After a pop (called after its units were handed out, so they hold their partitions). A scan or a pop of names that
   * took as much as it could may have left ready partitions behind: a scan asks for another scan, a pop of names keeps
   * the names it did not take.
   */
  synchronized void popped(String[] names, Collection<String> took, boolean full) {
    if (full) {
      if (names == null) {
        scanDue = true;
      } else {
        for (String n : names) {
          if (!took.contains(n)) {
            ready.add(n);
          }
        }
      }
    }
    for (String p : took) {
      // named while the pop ran: it may be a message the pop did not see; the unit that holds the partition brings
      // the name back when it is settled (or, settled already, it stays ready)
      if (held.containsKey(p) && ready.remove(p)) {
        deferred.add(p);
      }
    }
  }

  /** A unit now holds these partitions. */
  synchronized void hold(Collection<String> partitions) {
    for (String p : partitions) {
      held.merge(p, 1, Integer::sum);
    }
  }

  /**
   * A unit holding these partitions is settled. {@code mayHaveMore}: its partitions may hold more than it took (it
   * was cut short, it failed, or its lease was lost). Returns whether a partition became ready to pop.
   */
  synchronized boolean settled(Collection<String> partitions, boolean mayHaveMore) {
    boolean any = false;
    for (String p : partitions) {
      Integer n = held.get(p);
      if (n == null || n <= 1) {
        held.remove(p);
        if (deferred.remove(p) || mayHaveMore) {
          ready.add(p);
          any = true;
        }
      } else {
        held.put(p, n - 1);
      }
    }
    return any;
  }
}
