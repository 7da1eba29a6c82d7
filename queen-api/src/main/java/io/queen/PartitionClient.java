package io.queen;

import java.util.List;

/**
 * Pushes to one partition of a queue. Thread-safe.
 *
 * <p>Every push here is retried by Queen on transient failures, de-duplicated by transaction id, exactly as
 * {@link QueueClient#push(List)} describes: a push that returns has stored each item once. A
 * {@link PushOutcomeUnknownException} means Queen gave up while a try's outcome was unknown: push
 * {@link PushOutcomeUnknownException#items() e.items()} again (with {@link #pushAll}, or
 * {@link Queen#push}) — they carry the transaction ids this push used, including the ones Queen generated,
 * so what the failed push stored comes back DUPLICATE instead of being stored twice. Pushing your original
 * payloads again is not safe then: they would get new ids. Any other {@link QueenDatabaseException}: nothing
 * was stored.
 */
public interface PartitionClient {
  /** Pushes one payload (any Jackson-serialisable object, a {@code JsonNode}, or {@link Json}). */
  PushResult push(Object payload);

  /** Pushes one item; its partition is replaced by this partition. */
  PushResult push(PushItem item);

  /** Pushes payloads (or {@link PushItem}s, whose partition is replaced) in one transaction, in order. */
  List<PushResult> pushAll(List<?> payloads);
}
