package io.queen.embedded.internal.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.queen.AckResult;
import io.queen.CommitResult;
import io.queen.ConnectorStatus;
import io.queen.DeadLetter;
import io.queen.KvEntry;
import io.queen.KvPage;
import io.queen.KvWriteResult;
import io.queen.Message;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.QueueConfig;
import io.queen.Status;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * The JSON shapes of the HTTP answers. Field names are the documented ones (camelCase, {@code data} for a message's payload,
 * enum values in lower case: {@code queued}, {@code kv_precondition}); times are ISO-8601 instants, durations
 * milliseconds in fields ending {@code Ms}.
 */
final class Views {
  static final ObjectMapper OUT = new ObjectMapper().disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);

  private Views() {}

  static String lower(Enum<?> e) {
    return e == null ? null : e.name().toLowerCase(Locale.ROOT);
  }

  static String time(Instant t) {
    return t == null ? null : t.toString();
  }

  static ObjectNode obj() {
    return OUT.createObjectNode();
  }

  static ArrayNode arr() {
    return OUT.createArrayNode();
  }

  static ObjectNode push(PushResult r) {
    return obj().put("index", r.index()).put("queue", r.queue()).put("partition", r.partition())
        .put("status", lower(r.status())).put("messageId", r.messageId() == null ? null : r.messageId().toString())
        .put("offset", r.offset()).put("transactionId", r.transactionId());
  }

  static ArrayNode pushes(List<PushResult> rs) {
    ArrayNode a = arr();
    rs.forEach(r -> a.add(push(r)));
    return a;
  }

  static ObjectNode message(Message m) {
    ObjectNode n = obj().put("id", m.id().toString()).put("transactionId", m.transactionId())
        .put("traceId", m.traceId()).put("queue", m.queue()).put("partition", m.partition())
        .put("partitionId", m.partitionId()).put("offset", m.offset())
        .put("leaseId", m.leaseId() == null ? null : m.leaseId().toString())
        .put("consumerGroup", m.consumerGroup()).put("attempt", m.attempt()).put("createdAt", time(m.createdAt()));
    if (m.payloadType() != null) {
      n.put("payloadType", m.payloadType()).put("payloadVersion", m.payloadVersion());
    }
    n.set("data", m.payload());
    return n;
  }

  static ObjectNode ack(AckResult r) {
    return obj().put("partitionId", r.partitionId()).put("offset", r.offset()).put("outcome", lower(r.outcome()))
        .put("success", r.success());
  }

  static ObjectNode entry(KvEntry e) {
    ObjectNode n = obj().put("key", e.key()).put("found", e.found());
    n.set("value", e.found() ? e.value() : null);
    return n.put("version", e.version()).put("expiresAt", time(e.expiresAt()));
  }

  static ObjectNode page(KvPage p) {
    ArrayNode rows = arr();
    p.rows().forEach(e -> rows.add(entry(e)));
    ObjectNode n = obj();
    n.set("rows", rows);
    return n.put("truncated", p.truncated()).put("next", p.next());
  }

  static ObjectNode write(KvWriteResult w) {
    ObjectNode n = obj().put("key", w.key()).put("applied", w.applied()).put("reason", lower(w.reason()))
        .put("found", w.found());
    n.set("value", w.value());
    return n.put("version", w.version()).put("expiresAt", time(w.expiresAt()));
  }

  static ObjectNode commit(CommitResult r) {
    ObjectNode n = obj().put("success", r.success()).put("reason", lower(r.reason()));
    if (!r.success()) {
      n.put("failedOperation", r.failedOperation());
      n.set("value", r.value());
      n.put("version", r.version());
    }
    n.set("pushes", pushes(r.pushes()));
    ArrayNode acks = arr();
    r.acks().forEach(a -> acks.add(ack(a)));
    n.set("acks", acks);
    ArrayNode writes = arr();
    r.writes().forEach(w -> writes.add(write(w)));
    n.set("writes", writes);
    ArrayNode reads = arr();
    r.reads().forEach(e -> reads.add(entry(e)));
    n.set("reads", reads);
    return n;
  }

  static long ms(Duration d) {
    return d == null ? 0 : d.toMillis();
  }

  static ObjectNode config(QueueConfig c) {
    return obj().put("leaseTimeMs", ms(c.leaseTime())).put("retryLimit", c.retryLimit())
        .put("retryDelayMs", ms(c.retryDelay())).put("deadLetter", c.deadLetter())
        .put("delayedProcessingMs", ms(c.delayedProcessing())).put("windowBufferMs", ms(c.windowBuffer()))
        .put("maxSize", c.maxSize()).put("retentionMs", ms(c.retention()))
        .put("completedRetentionMs", ms(c.completedRetention())).put("allowDropPastCommitted", c.allowDropPastCommitted())
        .put("pendingAlertAfterMs", ms(c.pendingAlertAfter())).put("encryption", c.encryption());
  }

  static ObjectNode group(Status.GroupStatus g) {
    return obj().put("name", g.name()).put("default", Queen.DEFAULT_GROUP.equals(g.name())).put("lag", g.lag())
        .put("pendingAgeMs", ms(g.pendingAge())).put("leases", g.leases()).put("deadLetters", g.deadLetters())
        .put("pendingAlert", g.pendingAlert()).put("lostMessages", g.lostMessages());
  }

  static ObjectNode queue(Status.QueueStatus q) {
    ObjectNode n = obj().put("name", q.name()).put("partitions", q.partitions()).put("messages", q.messages())
        .put("pushed", q.pushed());
    long lag = 0;
    long oldest = 0;
    long dead = 0;
    ArrayNode groups = arr();
    for (Status.GroupStatus g : q.groups()) {
      groups.add(group(g));
      lag += g.lag();
      oldest = Math.max(oldest, ms(g.pendingAge()));
      dead += g.deadLetters();
    }
    n.put("lag", lag).put("oldestPendingMs", oldest).put("deadLetters", dead);
    n.set("groups", groups);
    n.set("config", q.config() == null ? null : config(q.config()));
    if (q.retention() != null) {
      Status.RetentionStatus r = q.retention();
      n.set("retention", obj().put("oldestKeptAt", time(r.oldestKeptAt())).put("oldestPartition", r.oldestPartition())
          .put("oldestOffset", r.oldestOffset()).put("heldBy", r.heldBy()).put("checkedAt", time(r.checkedAt())));
    }
    return n;
  }

  /** A connector's status as the {@code .status} block of the HTTP surface shows it ({@code phase}, {@code pointerLsn}, counters). */
  static ObjectNode connectorStatus(ConnectorStatus s) {
    ObjectNode n = obj().put("name", s.name()).put("kind", s.kind()).put("phase", s.phase())
        .put("errorCode", s.errorCode()).put("error", s.error()).put("lastProgress", time(s.lastProgress()))
        .put("pointerLsn", s.pointerLsn()).put("leaseNode", s.leaseNode())
        .put("leaseExpiresAt", time(s.leaseExpiresAt()));
    ObjectNode counters = obj();
    new TreeMap<>(s.counters()).forEach(counters::put);
    n.set("counters", counters);
    for (Map.Entry<String, Long> e : new TreeMap<>(s.counters()).entrySet()) {
      if (!n.has(e.getKey())) {
        n.put(e.getKey(), e.getValue()); // clients read .status.messages directly
      }
    }
    n.set("pointer", s.pointer());
    return n;
  }

  static ObjectNode status(Status st, String node, List<ConnectorStatus> connectors) {
    ObjectNode n = obj().put("node", node).put("version", Queen.version()).put("takenAt", time(st.takenAt()));
    ArrayNode queues = arr();
    st.queues().forEach(q -> queues.add(queue(q)));
    n.set("queues", queues);
    ArrayNode cs = arr();
    connectors.forEach(c -> cs.add(connectorStatus(c)));
    n.set("pg", obj().set("connectors", cs));
    n.set("nodes", nodes(st.nodes()));
    return n;
  }

  static ArrayNode nodes(List<Status.NodeStatus> nodes) {
    ArrayNode a = arr();
    for (Status.NodeStatus n : nodes) {
      a.add(obj().put("id", n.id()).put("startedAt", time(n.startedAt())).put("heartbeatAt", time(n.heartbeatAt()))
          .put("alive", n.alive()).put("version", n.version()).put("leases", n.leases()));
    }
    return a;
  }

  static ObjectNode partition(Status.PartitionStatus p) {
    ObjectNode n = obj().put("name", p.name()).put("id", p.id()).put("firstOffset", p.firstOffset())
        .put("nextOffset", p.nextOffset()).put("lastMessageAt", time(p.lastMessageAt()));
    ArrayNode cs = arr();
    for (Status.CursorStatus c : p.cursors()) {
      cs.add(obj().put("consumerGroup", c.group()).put("committedOffset", c.committedOffset()).put("lag", c.lag())
          .put("leaseOwner", c.leaseOwner()).put("leaseExpiresAt", time(c.leaseExpiresAt()))
          .put("attempts", c.attempts()));
    }
    n.set("cursors", cs);
    return n;
  }

  static ObjectNode deadLetter(DeadLetter d) {
    ObjectNode n = obj().put("id", d.id()).put("queue", d.queue()).put("partition", d.partition())
        .put("partitionId", d.partitionId()).put("offset", d.offset()).put("consumerGroup", d.group())
        .put("messageId", d.messageId() == null ? null : d.messageId().toString()).put("error", d.error())
        .put("attempts", d.attempts()).put("failedAt", time(d.failedAt())).put("payloadBytes", d.payloadBytes())
        .put("payloadError", d.payloadError());
    n.set("data", d.payload());
    return n;
  }

}
