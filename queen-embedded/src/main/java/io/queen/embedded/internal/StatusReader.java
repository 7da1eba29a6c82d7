package io.queen.embedded.internal;

import io.queen.QueueConfig;
import io.queen.Status;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;

/** Reads the {@link Status} snapshot in one repeatable-read transaction. */
final class StatusReader {
  private final DataSource ds;
  private final String s;

  StatusReader(DataSource ds, String quotedSchema) {
    this.ds = ds;
    this.s = quotedSchema;
  }

  Status read() {
    return Sql.inTransaction(ds, "status", c -> {
      try (PreparedStatement iso = c.prepareStatement("set transaction isolation level repeatable read read only")) {
        iso.execute();
      }
      {
        Instant now;
        try (PreparedStatement st = c.prepareStatement("select now()"); ResultSet rs = st.executeQuery()) {
          rs.next();
          now = rs.getTimestamp(1).toInstant();
        }
        Map<Long, List<Status.GroupStatus>> groups = new HashMap<>();
        try (PreparedStatement st = c.prepareStatement("select g.queue_id, g.name,"
            + " coalesce(sum(greatest(p.next_offset - 1 - greatest(c.committed_offset, p.first_offset - 1), 0)), 0),"
            + " coalesce(extract(epoch from now() - min(m.created_at)) * 1000, 0)::bigint,"
            + " count(*) filter (where c.lease_id is not null and c.lease_expires_at > now()),"
            + " (select count(*) from " + s + ".dead_letters d where d.queue_id = g.queue_id and d.group_name = g.name)"
            + " from " + s + ".consumer_groups g"
            + " left join " + s + ".cursors c on c.queue_id = g.queue_id and c.group_name = g.name"
            + " left join " + s + ".partitions p on p.id = c.partition_id"
            + " left join " + s + ".messages m on m.partition_id = c.partition_id"
            + "   and m.\"offset\" = greatest(c.committed_offset, p.first_offset - 1) + 1"
            + " group by g.queue_id, g.name order by g.name");
            ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            groups.computeIfAbsent(rs.getLong(1), k -> new ArrayList<>()).add(new Status.GroupStatus(rs.getString(2),
                rs.getLong(3), Duration.ofMillis(Math.max(0, rs.getLong(4))), rs.getLong(5), rs.getLong(6)));
          }
        }
        List<Status.QueueStatus> queues = new ArrayList<>();
        try (PreparedStatement st = c.prepareStatement("select q.id, q.name, q.lease_time_ms, q.retry_limit,"
            + " q.retry_delay_ms, q.dead_letter, q.delayed_processing_ms, q.window_buffer_ms, q.max_size,"
            + " (select count(*) from " + s + ".partitions p where p.queue_id = q.id),"
            + " (select coalesce(sum(p.next_offset - p.first_offset), 0) from " + s + ".partitions p where p.queue_id = q.id)"
            + " from " + s + ".queues q order by q.name");
            ResultSet rs = st.executeQuery()) {
          while (rs.next()) {
            QueueConfig cfg = Broker.readConfig(rs, 3);
            queues.add(new Status.QueueStatus(rs.getString(2), cfg, rs.getLong(10), rs.getLong(11),
                List.copyOf(groups.getOrDefault(rs.getLong(1), List.of()))));
          }
        }
        return new Status(now, List.copyOf(queues));
      }
    });
  }
}
