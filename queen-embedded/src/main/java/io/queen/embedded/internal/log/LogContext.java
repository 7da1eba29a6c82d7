package io.queen.embedded.internal.log;

import javax.sql.DataSource;

/**
 * What the parts of the log share: the node's {@code DataSource}, its schema (quoted), the payload codec, the node's
 * id, its metrics and its wake-ups.
 */
record LogContext(DataSource ds, String schema, JsonCodec codec, String node, Metrics metrics, Wakeups wakeups) {}
