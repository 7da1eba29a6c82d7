/**
 * The Postgres sink, unsupported and liable to change in any release: {@code Sink} (a queue written into a table,
 * exactly once through {@code queen.sink_progress}), the target's start check ({@code TargetTable}), the sql mode's
 * statement parsing ({@code SqlStatement}) and the sink's meters ({@code SinkMeters}, Micrometer only in
 * {@code MicrometerSinkMeters}). It may import {@link io.queen.pgconn.internal.spec}, queen-api and
 * {@code io.queen.embedded.spi}; never the registry or the source.
 */
package io.queen.pgconn.internal.sink;
