package io.queen;

import java.util.List;
import java.util.Objects;

/**
 * A push Queen gave up on after its connection was lost while the push was running: it may have
 * committed, or not. Queen retries such a push by itself (for up to the node's {@code connectTimeout}
 * after the first failure); this exception means those retries ran out too.
 *
 * <p><b>Retrying is safe, with {@link #items()}.</b> They are the request's items in request order, each
 * naming its queue and partition and carrying the transaction id this push used for it: the caller's,
 * or the one Queen generated. Push them again ({@code queen.push(e.items())}, or through the same
 * queue handle) and each comes back either {@link PushStatus#QUEUED} (the failed push had not stored it:
 * stored now) or {@link PushStatus#DUPLICATE} with the stored message's id and offset (stored by the
 * failed push, or by an earlier one with the same transaction id): either way it is stored exactly once.
 * Pushing the original items again instead is <em>not</em> safe for items without a transaction id, since
 * Queen would generate new ids for them. A batch is one transaction, so either all of it was stored or
 * none of it (apart from the caller's own duplicates). Push them again within 24 hours (the embedded
 * broker's {@code pushReceiptRetention}, 10 min .. 30 days): a generated id of a batch is found through the
 * push's receipt, which the janitor removes after that time (a caller's own transaction id is found for as
 * long as its message is stored). The items may go again whole, in part or in
 * another order.
 *
 * <p>Like every {@link QueenDatabaseException}, its message holds the operation, the SQLState and the
 * server's primary message, never payloads or statement text.
 */
public final class PushOutcomeUnknownException extends QueenDatabaseException {
  private static final long serialVersionUID = 1L;
  private final transient List<PushItem> items;

  public PushOutcomeUnknownException(QueenDatabaseException last, List<PushItem> items) {
    super(Objects.requireNonNull(last, "last must not be null").operation(), last.sqlState(), true, last.getCause(),
        "; the outcome of the " + items.size() + " item(s) is unknown: push items() again to store them exactly once");
    this.items = List.copyOf(items);
  }

  /**
   * The items of the failed push, in request order, with queue, partition and the transaction id it used
   * for each (never {@code null}): push these again to finish the push without storing anything twice.
   */
  public List<PushItem> items() {
    return items;
  }
}
