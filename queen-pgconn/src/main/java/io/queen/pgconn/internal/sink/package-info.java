/**
 * The Postgres sink, unsupported and liable to change in any release. {@code Sink} (the one public class with
 * {@code SinkMeters}: a queue written into a table, exactly once through {@code queen.sink_progress}) holds the
 * lifecycle and status and uses, one way down, {@code BatchApply} (one batch in its target transaction),
 * {@code RowStatements} (a message as a statement), {@code SinkTables} (the progress and dead-letter tables),
 * {@code TargetErrors} (reading the target's errors) and {@code TargetConnections}; the target's start check is
 * {@code TargetTable}, the sql mode's statement parsing {@code SqlStatement}, the meters {@code SinkMeters}
 * (Micrometer only in {@code MicrometerSinkMeters}). It may import {@link io.queen.pgconn.internal.spec}, queen-api
 * and {@code io.queen.embedded.spi}; never the registry or the source.
 */
package io.queen.pgconn.internal.sink;
