package io.queen.embedded.internal.tx;

import io.queen.AckResult;
import io.queen.CommitResult;
import io.queen.KvEntry;
import io.queen.KvWriteResult;
import io.queen.PushResult;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The results of one run of a bundle (a retried transaction starts a new one). Confined to the committing thread. */
final class Run {
  final List<PushResult> pushes = new ArrayList<>();
  final List<AckResult> acks = new ArrayList<>();
  final List<KvWriteResult> writes = new ArrayList<>();
  final List<KvEntry> reads = new ArrayList<>();
  /** The partitions that got a message, queue by queue: a commit Queen owns names them to the consume loops. */
  final Map<String, Set<String>> partitions = new LinkedHashMap<>();
  /** The bundle's failure (nothing of it stays), or null. */
  CommitResult failure;

  /** This run as a successful commit. */
  CommitResult success() {
    return new CommitResult(true, null, -1, null, 0, List.copyOf(pushes), List.copyOf(acks), List.copyOf(writes),
        List.copyOf(reads));
  }
}
