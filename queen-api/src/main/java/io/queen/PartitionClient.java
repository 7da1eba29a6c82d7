package io.queen;

import java.util.List;

/** Pushes to one partition of a queue. Thread-safe. */
public interface PartitionClient {
  /** Pushes one payload (any Jackson-serialisable object, a {@code JsonNode}, or {@link Json}). */
  PushResult push(Object payload);

  /** Pushes one item; its partition is replaced by this partition. */
  PushResult push(PushItem item);

  /** Pushes payloads in one transaction, in order. */
  List<PushResult> pushAll(List<?> payloads);
}
