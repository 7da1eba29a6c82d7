/**
 * The Postgres source: committed changes of tables become Queen messages through logical replication
 * (pgoutput), one partition per row key, in commit order, exactly once.
 *
 * <p>Rooms: {@code PgOutputDecoder} (bytes to {@link io.queen.pgconn.internal.source.PgMessage}),
 * {@code Values} and {@code ChangeEvents} (PostgreSQL text to the JSON change events, partitions and message
 * ids, the same for the snapshot and the stream), the setup checks, the owner ({@code Source}, a KV lease, with
 * {@code Takeover}) and {@code SourceAdmin} for the registry, the stream with its pointer ({@code Stream}, which
 * reports to its owner through its own {@code Stream.Owner}, and {@code StreamEvents}), and the chunked snapshot
 * with watermarks ({@code ChunkedSnapshot} over {@code ChunkReader}, {@code SnapshotHistory} and its own
 * {@code ChunkEvents}). Arrows run one way: no file here imports one that imports it. See the module README for the
 * exactly-once argument.
 * Unsupported, and may change in any release. It may import {@link io.queen.pgconn.internal.spec}, queen-api and
 * {@code io.queen.embedded.spi}; never the registry or the sink.
 */
package io.queen.pgconn.internal.source;
