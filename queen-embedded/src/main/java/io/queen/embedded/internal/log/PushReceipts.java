package io.queen.embedded.internal.log;

import io.queen.PushOutcomeUnknownException;
import io.queen.embedded.internal.db.Sql;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.UUID;
import javax.sql.DataSource;

/**
 * The push receipts: one row stands for a run of generated ids stored without transaction-id index entries
 * (see {@link MessageIds}); the janitor removes them after {@code pushReceiptRetention} and reports what is left.
 */
public final class PushReceipts {
  /** Receipts removed per statement by {@link #forgetOldReceipts}. */
  static final int RECEIPT_CHUNK = 10_000;

  /**
   * Janitor: removes the receipts of pushes older than {@code retention} (the node's pushReceiptRetention; by the time
   * in their ids, through the primary key, {@link #RECEIPT_CHUNK} at a time, at most {@code maxChunks} statements): a
   * push of {@link PushOutcomeUnknownException#items()} finds a receipt for so long. Returns how many it removed.
   */
  public static long forgetOldReceipts(DataSource ds, String quotedSchema, Duration retention, int maxChunks) {
    long cutoffMillis = System.currentTimeMillis() - retention.toMillis();
    UUID bound = new UUID(cutoffMillis << 16, 0L); // below every id made in that millisecond or later (idMillis)
    long removed = 0;
    for (int chunk = 0; chunk < maxChunks; chunk++) {
      int n = Sql.inTransaction(ds, "remove old push receipts", c -> {
        Sql.indexPlansOnly(c); // receipts through their key: a table a vacuum found empty is taken for one row
        try (PreparedStatement st = c.prepareStatement("delete from " + quotedSchema + ".push_receipts where anchor in"
            + " (select anchor from " + quotedSchema + ".push_receipts where anchor < ? order by anchor limit ?)")) {
          st.setObject(1, bound);
          st.setInt(2, RECEIPT_CHUNK);
          return st.executeUpdate();
        }
      });
      removed += n;
      if (n < RECEIPT_CHUNK) {
        break;
      }
    }
    return removed;
  }

  /** What is left after a pass of {@link #forgetOldReceipts}: rows (PostgreSQL's estimate) and the oldest one's age. */
  public record ReceiptsLeft(long rows, double oldestAgeSeconds) {}

  /**
   * The push receipts left: the table's row estimate from {@code pg_class} (a count would read the whole table, which
   * holds the retention's worth of pushes) and the age of the oldest receipt, from the time in the first anchor of the
   * primary key.
   */
  public static ReceiptsLeft receiptsLeft(DataSource ds, String quotedSchema) {
    return Sql.inTransaction(ds, "read the push receipts left", c -> {
      Sql.indexPlansOnly(c); // receipts through their key: a table a vacuum found empty is taken for one row
      try (PreparedStatement st = c.prepareStatement("select greatest(c.reltuples, 0)::bigint,"
          + " (select r.anchor from " + quotedSchema + ".push_receipts r order by r.anchor limit 1)"
          + " from pg_class c where c.oid = ?::regclass")) {
        st.setString(1, quotedSchema + ".push_receipts");
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          UUID oldest = rs.getObject(2, UUID.class);
          double age = oldest == null ? 0
              : Math.max(0, System.currentTimeMillis() - MessageIds.idMillis(oldest)) / 1000.0;
          return new ReceiptsLeft(oldest == null ? 0 : Math.max(1, rs.getLong(1)), age);
        }
      }
    });
  }

  private PushReceipts() {}
}
