package io.queen.embedded.internal.tx;

import io.queen.PushItem;
import io.queen.embedded.internal.kv.KvWrite;
import io.queen.embedded.internal.log.Broker;
import java.util.List;

/** One operation of a bundle, recorded (and checked) when it is added; nothing runs before the commit. */
sealed interface Op permits Op.PushOp, Op.AckOp, Op.WriteOp, Op.GetOp, Op.GetManyOp {

  /** A push, its payload already checked and encoded when it was added. */
  record PushOp(PushItem item, String payloadJson) implements Op {}

  record AckOp(List<Broker.AckRequest> acks) implements Op {}

  record WriteOp(KvWrite write) implements Op {}

  record GetOp(String namespace, String key) implements Op {}

  record GetManyOp(String namespace, List<String> keys) implements Op {}
}
