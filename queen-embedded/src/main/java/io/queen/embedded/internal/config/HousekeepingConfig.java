package io.queen.embedded.internal.config;

import java.time.Duration;

/**
 * What the node's janitor removes and watches: whether it runs, how long push receipts are kept, after how long an
 * empty partition and an idle consumer group are removed (zero: never), and after how long a transaction holding the
 * xmin horizon is named in a WARN (zero: off).
 */
public record HousekeepingConfig(boolean janitor, Duration pushReceiptRetention, Duration removeEmptyPartitionsAfter,
    Duration groupIdleExpiry, Duration horizonWarnAfter) {}
