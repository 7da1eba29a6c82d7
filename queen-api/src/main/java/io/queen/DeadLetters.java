package io.queen;

import java.util.List;

/** The dead-letter queue of one queue. Thread-safe. */
public interface DeadLetters {
  /** Dead letters of one group. */
  Query group(String group);

  /** Dead letters of the queue's default group. */
  Query defaultGroup();

  /** Browse and act on the dead letters of one queue and group. */
  interface Query {
    /**
     * A page in {@code id} order after {@code afterId} (exclusive; {@code null} for the first page).
     *
     * @param limit 1..1000
     */
    List<DeadLetter> list(int limit, Long afterId);

    long count();

    /**
     * Puts the message back on its partition for this group only: it is delivered to this group again
     * (with its original payload, id and transaction id) before the partition's next message, and
     * the dead-letter row is removed. Returns false if the row no longer exists.
     */
    boolean redrive(DeadLetter deadLetter);

    /** Redrives every dead letter of the group; returns how many. */
    int redriveAll();

    /** Removes every dead-letter row of the group (the messages stay in their partitions). */
    int purge();

    /**
     * Removes one dead-letter row of this group (the message stays in its partition, and the group's cursor stays
     * past it): the operator's "delete" for a letter that needs no redrive. Returns false if the row no longer exists.
     */
    boolean delete(DeadLetter deadLetter);
  }
}
