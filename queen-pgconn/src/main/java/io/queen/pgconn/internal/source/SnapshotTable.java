package io.queen.pgconn.internal.source;

import java.util.List;
import java.util.Objects;

/** One table of a source's snapshot, in document order: where its rows go and how they are partitioned. */
record SnapshotTable(String schema, String name, String queue, List<String> partitionBy, boolean single) {
SnapshotTable {
    Objects.requireNonNull(schema, "schema must not be null");
    Objects.requireNonNull(name, "name must not be null");
    Objects.requireNonNull(queue, "queue must not be null");
    partitionBy = List.copyOf(partitionBy);
  }

  /** {@code schema.name}, as in the events' {@code table} field. */
  public String qualifiedName() {
    return schema + "." + name;
  }
}
