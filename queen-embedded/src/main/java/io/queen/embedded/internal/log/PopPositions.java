package io.queen.embedded.internal.log;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where this node's last pop of each queue and group stopped (its last partition id): the next scan of the group
 * starts after it and wraps around, so every ready partition gets its turn. Thread-safe.
 */
final class PopPositions {
  private final ConcurrentHashMap<String, Long> positions = new ConcurrentHashMap<>();

  /** The key of a queue and group. */
  static String key(String queue, String group) {
    return queue + '\u0000' + group;
  }

  Long get(String key) {
    return positions.get(key);
  }

  void put(String key, long lastPartitionId) {
    positions.put(key, lastPartitionId);
  }

  void forgetQueue(String queue) {
    positions.keySet().removeIf(k -> k.startsWith(queue + '\u0000'));
  }

  void forgetGroup(String queue, String group) {
    positions.remove(key(queue, group));
  }

  /** The queues of the positions held. */
  Set<String> queues() {
    Set<String> out = new HashSet<>();
    for (String k : positions.keySet()) {
      out.add(k.substring(0, k.indexOf('\u0000')));
    }
    return out;
  }

  int size() {
    return positions.size();
  }
}
