package io.queen.pgconn.internal.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * How far a source got, as committed in Queen's KV in the same transaction as the messages it covers (the
 * source's pointer). Every source transaction whose commit LSN is below {@code lsn} is in Queen; the one at {@code lsn}
 * is in whole when {@code complete}, else its first {@code count} changes are (a big transaction in pieces).
 * {@code flush} is the LSN the source may confirm to PostgreSQL (the end of the last whole transaction, or the
 * WAL end of an idle advance): it is never below the slot's {@code confirmed_flush_lsn} (R4, R5).
 *
 * @param epoch the message ids' epoch; new at every resync
 * @param snapshot the snapshot's progress (opaque, see {@link SnapshotHook#progress()}), or null
 * @param resync a resync was asked for: the owner drops the slot and starts over with a new epoch
 */
record Pointer(long lsn, int count, boolean complete, long flush, String epoch, JsonNode snapshot, boolean resync) {

  /** Whether the change {@code ordinal} of the transaction committed at {@code commitLsn} is in Queen already. */
  boolean covers(long commitLsn, int ordinal) {
    int c = Long.compareUnsigned(commitLsn, lsn);
    return c < 0 || (c == 0 && (complete || ordinal < count));
  }

  /** Whether a record at {@code lsn} (a marker) is covered. */
  boolean covers(long at) {
    return Long.compareUnsigned(at, lsn) <= 0;
  }

  ObjectNode json(ObjectMapper m, Codec codec) {
    ObjectNode o = m.createObjectNode();
    o.put("lsn", codec.formatLsn(lsn));
    if (!complete) {
      o.put("count", count);
    }
    o.put("complete", complete);
    o.put("flush", codec.formatLsn(flush));
    o.put("epoch", epoch);
    if (snapshot != null) {
      o.set("snapshot", snapshot);
    }
    if (resync) {
      o.put("resync", true);
    }
    return o;
  }

  static Pointer of(JsonNode o, Codec codec) {
    return new Pointer(codec.parseLsn(o.path("lsn").asText("0/0")), o.path("count").asInt(0),
        o.path("complete").asBoolean(true), codec.parseLsn(o.path("flush").asText("0/0")), o.path("epoch").asText(null),
        o.hasNonNull("snapshot") ? o.get("snapshot") : null, o.path("resync").asBoolean(false));
  }
}
