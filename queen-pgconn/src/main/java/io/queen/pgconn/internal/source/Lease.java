package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvWriteResult;
import java.time.Duration;

/**
 * A source's ownership lease in Queen's KV: taken with {@code putIfAbsent} and a TTL, renewed at a third of the
 * TTL with {@code expect} = the version this node holds, given back at once (a versioned delete). Whoever holds it
 * runs the source; the pointer's own {@code expect} fences an owner that lost it without noticing. Thread-safe.
 */
final class Lease {
  static final String NAMESPACE = "queen-pg";

  private final Kv kv;
  private final String key;
  private final String node;
  private final Duration ttl;
  private volatile long version;

  /** @param kv the connector host's KV, which still answers while the node closes its connectors */
  Lease(Kv kv, String connector, String node, Duration ttl) {
    this.kv = kv;
    this.key = leaseKey(connector);
    this.node = node;
    this.ttl = ttl;
  }

  static String leaseKey(String connector) {
    return "source/" + connector + "/lease";
  }

  static String pointerKey(String connector) {
    return "source/" + connector + "/pointer";
  }

  /** Takes the lease when nobody holds it; true when this node holds it now. */
  boolean acquire() {
    ObjectNode v = JsonNodeFactory.instance.objectNode().put("node", node);
    KvWriteResult r = kv.putIfAbsent(NAMESPACE, key, v, Kv.ttl(ttl));
    if (r.applied()) {
      version = r.version();
      return true;
    }
    return false;
  }

  /** Renews the held lease; false when it was lost (expired and taken, or deleted). */
  boolean renew() {
    long v = version;
    if (v == 0) {
      return false;
    }
    ObjectNode value = JsonNodeFactory.instance.objectNode().put("node", node);
    KvWriteResult r = kv.put(NAMESPACE, key, value, Kv.ttl(ttl).expect(v));
    if (r.applied()) {
      version = r.version();
      return true;
    }
    version = 0;
    return false;
  }

  /** Gives the lease back at once (only the version this node holds). */
  void release() {
    long v = version;
    version = 0;
    if (v != 0) {
      kv.delete(NAMESPACE, key, v);
    }
  }

  /** Forgets the lease without giving it back (a simulated crash: it runs out after the TTL). */
  void abandon() {
    version = 0;
  }

  boolean held() {
    return version != 0;
  }

  Duration ttl() {
    return ttl;
  }

  /** The lease as every node reads it. */
  static KvEntry read(Kv kv, String connector) {
    return kv.get(NAMESPACE, leaseKey(connector));
  }
}
