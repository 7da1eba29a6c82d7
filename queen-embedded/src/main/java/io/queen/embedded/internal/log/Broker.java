package io.queen.embedded.internal.log;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;
import io.queen.AckOutcome;
import io.queen.AckResult;
import io.queen.AckStatus;
import io.queen.Message;
import io.queen.PayloadSerializationException;
import io.queen.Queen;
import io.queen.embedded.internal.db.Sql;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The log, and the consuming side of it: pop, ack, renew and release as calls of the SQL functions in
 * {@code sql/functions/}. The node's other log operations are in the parts it holds: {@link #pushes()} (the push
 * path) and {@link #catalogue()} (queues and groups); {@link PushReceipts} is the janitor's. Methods taking a
 * {@link Connection} run inside the caller's transaction (the transaction bundle uses them); the others own their
 * transaction.
 *
 * <p>Over 600 lines: pop, ack, renew and release with what each needs around its SQL call (the key checks and the
 * decryption of what a pop returns, the dead-letter reports of an ack); the push path and the catalogue live apart.
 */
public final class Broker {
  private static final Logger LOG = LoggerFactory.getLogger(Broker.class);

  private final DataSource ds;
  private final String schema;
  private final JsonCodec codec;
  private final String node;
  private final Metrics metrics;
  private final Pusher pushes;
  private final QueueCatalogue catalogue;
  private final String popSql;
  /** Where this node's last pop of each queue and group stopped. */
  private final PopPositions positions = new PopPositions();
  private final String ackSql;
  private final String ackKeepingBusySql;
  private final String renewSql;
  private final String releaseSql;
  private final String shrinkSql;
  private final String deadLetterAutoAckedSql;
  private final io.queen.PayloadTypes types;
  private final PayloadCipher cipher;
  /** The cluster's key list, which this node's current key must be on before it seals a push. */
  private final KeyRegistry keys;
  /** The ids of the keys this node holds, as pop takes them: it leases no partition whose next message needs another. */
  private final String[] keyIds;
  private final EncryptionViews encryption;
  private final GroupActivity activity = new GroupActivity();

  /**
   * @param pushRetryWindow how long a push Queen owns is tried again after its first transient failure (the
   *     node's {@code connectTimeout})
   */
  public Broker(DataSource ds, String schema, JsonCodec codec, String node, Wakeups wakeups, Metrics metrics,
      int maxPayloadBytes, Duration pushRetryWindow, io.queen.PayloadTypes types, PayloadCipher cipher) {
    this.ds = ds;
    this.cipher = Objects.requireNonNull(cipher, "cipher must not be null");
    this.keyIds = cipher.ids().toArray(new String[0]);
    this.types = Objects.requireNonNull(types, "types must not be null");
    this.metrics = metrics;
    this.schema = Sql.quoteIdent(schema);
    this.codec = codec;
    this.node = node;
    this.keys = new KeyRegistry(ds, this.schema, cipher, node);
    this.encryption = new EncryptionViews(ds, this.schema, cipher);
    LogContext log = new LogContext(ds, this.schema, codec, node, metrics, wakeups);
    this.pushes = new Pusher(log, maxPayloadBytes, pushRetryWindow, types, cipher, keys, encryption);
    this.catalogue = new QueueCatalogue(log, activity, encryption, positions);
    // pop returns each row with its payload type, version and encryption key id
    this.popSql = "select partition_name, partition_id, msg_offset, message_id, transaction_id, trace_id, payload::text,"
        + " created_at, lease_id, attempt, payload_type, payload_version, key_id from " + this.schema
        + ".pop(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::text[], ?::text[])";
    this.ackSql = "select idx, outcome from " + this.schema
        + ".ack(?::bigint[], ?::text[], ?::bigint[], ?::text[]::uuid[], ?::text[], ?::text[])";
    // the consume loop's acks leave a busy partition's has_pending flag set (it pops the partitions pushes name)
    this.ackKeepingBusySql = "select idx, outcome from " + this.schema
        + ".ack(?::bigint[], ?::text[], ?::bigint[], ?::text[]::uuid[], ?::text[], ?::text[], true)";
    this.renewSql = "select partition_id from " + this.schema + ".renew(?::bigint[], ?::text[], ?::text[]::uuid[])";
    this.releaseSql = "select " + this.schema + ".release(?::bigint[], ?::text[], ?::text[]::uuid[])";
    this.shrinkSql = "select " + this.schema + ".shrink_lease(?, ?, ?, ?)";
    this.deadLetterAutoAckedSql = "insert into " + this.schema + ".dead_letters(queue_id, partition_id, \"offset\","
        + " group_name, message_id, error, attempts) select q.id, m.partition_id, m.\"offset\", ?, m.id, ?, 1 from "
        + this.schema + ".messages m join " + this.schema + ".partitions p on p.id = m.partition_id join " + this.schema
        + ".queues q on q.id = p.queue_id where m.partition_id = ? and m.\"offset\" = ? and q.dead_letter";
  }

  public String schema() {
    return schema;
  }

  public DataSource dataSource() {
    return ds;
  }

  public JsonCodec codec() {
    return codec;
  }

  public String node() {
    return node;
  }

  /** The push path. */
  public Pusher pushes() {
    return pushes;
  }

  /** Queues and groups: their existence, configuration, deletion, seeks. */
  public QueueCatalogue catalogue() {
    return catalogue;
  }

  /** Whether queues have encryption on, as this node last read it. */
  public EncryptionViews encryption() {
    return encryption;
  }

  /** The node's payload cipher (its current and older keys). */
  public PayloadCipher cipher() {
    return cipher;
  }

  /** The cluster's key list as this node checks it. */
  public KeyRegistry keys() {
    return keys;
  }

  // -------------------------------------------------------------------------------------------- pop

  /**
   * The parameters of one pop. {@code hints}: the names of the partitions to look at (the consume loop's: those a push or a finished
   * unit named), or null to scan the group's flagged cursors from where this node's previous scan stopped.
   */
  public record PopRequest(String queue, String group, int batch, int partitions, String partition, Duration leaseTime,
      String mode, Instant from, boolean autoAck, String[] hints) {
    public PopRequest(String queue, String group, int batch, int partitions, String partition, Duration leaseTime,
        String mode, Instant from, boolean autoAck) {
      this(queue, group, batch, partitions, partition, leaseTime, mode, from, autoAck, null);
    }
  }

  /** Pops once, without waiting (one statement, its own transaction). */
  public List<Message> pop(PopRequest r) {
    activity.touch(r.queue(), r.group());
    if (!cipher.canSeal() && encryption.encrypted(r.queue(), "pop")) {
      throw new io.queen.EncryptionException(r.queue(), EncryptionViews.noKey(r.queue(), "pop from"));
    }
    // a pop whose every message was undecodable (and dealt with) pops again, a bounded number of times
    for (int round = 0; ; round++) {
      List<Popped> popped = popOnce(r);
      refuseMissingKeys(r, popped);
      List<Message> got = deliverable(popped);
      metrics.delivered(r.queue(), r.group(), got);
      if (!got.isEmpty() || popped.isEmpty() || round == 4) {
        return got;
      }
    }
  }

  private List<Popped> popOnce(PopRequest r) {
    List<Popped> popped = Sql.autoCommit(ds, "pop", c -> {
      try (PreparedStatement st = c.prepareStatement(popSql)) {
        st.setString(1, r.queue());
        st.setString(2, r.group());
        st.setInt(3, r.batch());
        st.setInt(4, r.partitions());
        st.setString(5, r.partition());
        if (r.leaseTime() == null) {
          st.setNull(6, Types.BIGINT);
        } else {
          st.setLong(6, r.leaseTime().toMillis());
        }
        st.setString(7, node);
        st.setString(8, r.mode());
        st.setTimestamp(9, r.from() == null ? null : Timestamp.from(r.from()));
        st.setBoolean(10, r.autoAck());
        // a scan goes on from where this node's previous scan of the group stopped; a pop of named partitions does not
        // move that position
        String position = r.partition() == null && r.hints() == null ? PopPositions.key(r.queue(), r.group()) : null;
        Long after = position == null ? null : positions.get(position);
        if (after == null) {
          st.setNull(11, Types.BIGINT);
        } else {
          st.setLong(11, after);
        }
        if (r.hints() == null) {
          st.setNull(12, Types.ARRAY);
        } else {
          st.setArray(12, c.createArrayOf("text", r.hints()));
        }
        // every pop names the keys this node holds (none: an empty list), so that it leases no partition whose next
        // message it could not open
        st.setArray(13, c.createArrayOf("text", keyIds));
        List<Popped> out = new ArrayList<>();
        long last = -1;
        try (ResultSet rs = st.executeQuery()) {
          reportDeadLetters(st);
          while (rs.next()) {
            if (rs.getObject(4) == null) {
              // no message: the scan passed over partitions that wait for a key this node lacks, up to this one
              last = rs.getLong(2);
              continue;
            }
            String text = rs.getString(7);
            String keyId = rs.getString(13);
            JsonNode payload = null;
            String error = null;
            String missingKey = null;
            try {
              if (keyId != null) {
                if (!cipher.canOpen(keyId)) {
                  missingKey = keyId;
                  throw new PayloadSerializationException(encryption.missingKey(r.queue(), keyId), null);
                }
                text = cipher.open(text, keyId, rs.getObject(4, UUID.class));
              }
              payload = codec.parse(text);
            } catch (PayloadSerializationException e) {
              error = e.getMessage();
            } catch (IllegalArgumentException e) {
              error = e.getMessage(); // a sealed payload that fails its check: never the content
            }
            UUID id = rs.getObject(4, UUID.class);
            out.add(new Popped(new Message(r.queue(), rs.getString(1), rs.getLong(2), rs.getLong(3),
                id, transactionId(rs.getString(5), id), rs.getString(6),
                payload != null ? payload : NullNode.getInstance(), rs.getTimestamp(8).toInstant(), r.group(),
                rs.getObject(9, UUID.class), rs.getInt(10), codec.mapper(), rs.getString(11), rs.getInt(12), types),
                error, missingKey));
            last = rs.getLong(2);
          }
        }
        if (position != null && last >= 0) {
          positions.put(position, last);
        }
        return out;
      }
    });
    return popped;
  }

  /**
   * A popped row: the message, or why its payload could not be decoded; {@code missingKey} when it is sealed under
   * a key this node does not hold.
   */
  private record Popped(Message message, String error, String missingKey) {}

  /**
   * The pop statement is given the ids of this node's keys and returns no message sealed under another key: it leases
   * no partition whose next message needs one, and cuts a range before such a message, so those wait for a node with
   * the key while the other partitions are served. Should a popped row still name a key this node lacks, every lease
   * of the pop is given back without counting an attempt and the pop refuses with
   * {@link io.queen.EncryptionException} naming the key ids. (Auto-acked rows, whose cursor has already moved, go the
   * way of undecodable ones: a dead-letter row and a WARN, never silently.)
   */
  private void refuseMissingKeys(PopRequest r, List<Popped> popped) {
    String keyId = null;
    for (Popped p : popped) {
      if (p.missingKey() != null && p.message().leaseId() != null) {
        keyId = p.missingKey();
        break;
      }
    }
    if (keyId == null) {
      return;
    }
    java.util.Map<Long, Message> leases = new java.util.LinkedHashMap<>();
    for (Popped p : popped) {
      if (p.message().leaseId() != null) {
        leases.putIfAbsent(p.message().partitionId(), p.message());
      }
    }
    release(new ArrayList<>(leases.values()));
    throw new io.queen.EncryptionException(r.queue(), encryption.missingKey(r.queue(), keyId) + "; the popped messages were given"
        + " back untouched");
  }

  /**
   * The messages of a pop that can be delivered, after dealing with those whose payload cannot be
   * decoded (a text beyond the reader's limits, stored by hand or under another mapper). Such a message
   * never holds its partition: at the head of its partition's batch it is dead-lettered at once under
   * the lease just taken (and the rest of the batch delivered); behind delivered messages it cuts the
   * lease short just before it, so acking what was delivered releases the partition and the next pop
   * has it at its head. Auto-acked (the cursor has passed it) it gets a dead-letter row and is skipped.
   */
  private List<Message> deliverable(List<Popped> popped) {
    List<Message> out = new ArrayList<>(popped.size());
    boolean allGood = true;
    for (Popped p : popped) {
      if (p.error() != null) {
        allGood = false;
        break;
      }
      out.add(p.message());
    }
    if (allGood) {
      return out;
    }
    out.clear();
    java.util.Map<Long, List<Popped>> byPartition = new java.util.LinkedHashMap<>();
    for (Popped p : popped) {
      byPartition.computeIfAbsent(p.message().partitionId(), k -> new ArrayList<>()).add(p);
    }
    List<AckRequest> deadLetters = new ArrayList<>();
    List<Message> cuts = new ArrayList<>();
    List<Popped> autoAcked = new ArrayList<>();
    for (List<Popped> rows : byPartition.values()) {
      rows.sort(java.util.Comparator.comparingLong(p -> p.message().offset()));
      boolean delivered = false;
      for (Popped p : rows) {
        Message m = p.message();
        if (p.error() == null) {
          out.add(m);
          delivered = true;
        } else if (m.leaseId() == null) {
          autoAcked.add(p);
        } else if (!delivered) {
          deadLetters.add(new AckRequest(m, AckStatus.DEAD_LETTER, "payload cannot be decoded: " + p.error()));
        } else {
          cuts.add(m);
          break; // nothing after it is delivered before it is dealt with
        }
      }
    }
    for (AckRequest a : deadLetters) {
      Message m = a.message();
      LOG.warn("{} - message {} ({}/{} offset {}, group '{}') cannot be decoded and goes to the dead-letter queue: {}",
          node, m.id(), m.queue(), m.partition(), m.offset(), m.consumerGroup(), a.error());
    }
    if (!deadLetters.isEmpty()) {
      ack(deadLetters);
    }
    if (!cuts.isEmpty() || !autoAcked.isEmpty()) {
      Sql.autoCommit(ds, "pop", c -> {
        for (Message m : cuts) {
          try (PreparedStatement st = c.prepareStatement(shrinkSql)) {
            st.setLong(1, m.partitionId());
            st.setString(2, m.consumerGroup());
            st.setObject(3, m.leaseId());
            st.setLong(4, m.offset() - 1);
            st.executeQuery().close();
          }
        }
        for (Popped p : autoAcked) {
          Message m = p.message();
          LOG.warn("{} - message {} ({}/{} offset {}, group '{}', auto-ack) cannot be decoded and is not delivered: {}",
              node, m.id(), m.queue(), m.partition(), m.offset(), m.consumerGroup(), p.error());
          try (PreparedStatement st = c.prepareStatement(deadLetterAutoAckedSql)) {
            st.setString(1, m.consumerGroup());
            st.setString(2, "payload cannot be decoded: " + p.error());
            st.setLong(3, m.partitionId());
            st.setLong(4, m.offset());
            st.executeUpdate();
          }
        }
        return null;
      });
    }
    return out;
  }

  /**
   * Logs the dead-letter moves the database reported while running {@code st} (notices raised by the
   * {@code dead_letter} function): one WARN each, with queue, group, partition, offset, attempts and the
   * last error, never the payload.
   */
  public void reportDeadLetters(java.sql.Statement st) {
    try {
      for (java.sql.SQLWarning w = st.getWarnings(); w != null; w = w.getNextWarning()) {
        if (!(w instanceof org.postgresql.util.PSQLWarning pw) || pw.getServerErrorMessage() == null
            || !"queen:dead_letter".equals(pw.getServerErrorMessage().getMessage())) {
          continue;
        }
        JsonNode d = codec.mapper().readTree(pw.getServerErrorMessage().getDetail());
        String group = d.path("group").asText();
        LOG.warn("{} - {} {} partition '{}' offset {} after {} attempt(s); last error: {}", node,
            d.path("kept").asBoolean() ? "dead-lettered" : "dropped (deadLetter=false)",
            where(d.path("queue").asText(), group), d.path("partition").asText(),
            d.path("offset").asLong(), d.path("attempts").asInt(), d.path("error").asText("(none)"));
        metrics.deadLettered(d.path("queue").asText(), group, d.path("kept").asBoolean());
      }
      st.clearWarnings();
    } catch (SQLException | java.io.IOException | RuntimeException e) {
      LOG.debug("{} - could not read the database's dead-letter notices: {}", node, e.toString());
    }
  }

  // -------------------------------------------------------------------------------------------- ack

  /** One acknowledgement. */
  public record AckRequest(Message message, AckStatus status, String error) {
    /**
     * The error text is stored as it comes, shortened to 8,192 characters and with any NUL character (which
     * PostgreSQL's text refuses, and which would fail the whole acknowledgement call) replaced by U+FFFD.
     */
    public AckRequest {
      Objects.requireNonNull(message, "message must not be null");
      Objects.requireNonNull(status, "status must not be null");
      if (error != null && error.length() > 8192) {
        error = error.substring(0, 8192);
      }
      if (error != null && error.indexOf('\0') >= 0) {
        error = error.replace('\0', '\uFFFD');
      }
    }
  }

  /**
   * Acknowledges in a transaction Queen owns. Retried on a fresh connection when the connection is lost:
   * an ack is idempotent (a message the first try already acknowledged reports ALREADY_ACKED and changes
   * nothing, whatever became of its lease).
   */
  public List<AckResult> ack(List<AckRequest> acks) {
    return ack(acks, false);
  }

  /**
   * {@link #ack(List)}; {@code keepBusy}: the consume loop's acks, which leave the {@code has_pending} flag of a partition
   * pushed to in the last 100 ms set (the loop pops the partitions pushes name, so the flag costs it nothing, and the
   * next push into the partition writes nothing to its cursors). A consumer's own acks clear it: its pops scan.
   */
  public List<AckResult> ack(List<AckRequest> acks, boolean keepBusy) {
    List<AckResult> res = Sql.idempotent(ds, "ack", true, c -> ack(c, acks, keepBusy));
    if (metrics.enabled()) {
      for (int i = 0; i < res.size(); i++) {
        Message m = acks.get(i).message();
        metrics.acked(m.queue(), m.consumerGroup(), List.of(res.get(i)));
      }
    }
    return res;
  }

  public Metrics metrics() {
    return metrics;
  }

  /** The groups this node used since the janitor last wrote their activity. */
  public GroupActivity activity() {
    return activity;
  }

  /**
   * Acknowledges on the caller's connection, inside the caller's transaction. Messages delivered with
   * auto-ack (no lease) are reported ACKED without touching the database.
   */
  public List<AckResult> ack(Connection c, List<AckRequest> acks) throws SQLException {
    return ack(c, acks, false);
  }

  private List<AckResult> ack(Connection c, List<AckRequest> acks, boolean keepBusy) throws SQLException {
    int n = acks.size();
    AckResult[] out = new AckResult[n];
    List<Integer> sent = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      Message m = acks.get(i).message();
      activity.touch(m.queue(), m.consumerGroup());
      if (m.leaseId() == null) {
        out[i] = new AckResult(m.partitionId(), m.offset(), AckOutcome.ACKED);
      } else {
        sent.add(i);
      }
    }
    if (!sent.isEmpty()) {
      List<AckRequest> leased = new ArrayList<>(sent.size());
      for (int i : sent) {
        leased.add(acks.get(i));
      }
      try (PreparedStatement st = c.prepareStatement(keepBusy ? ackKeepingBusySql : ackSql)) {
        bindAcks(c, st, 1, leased);
        try (ResultSet rs = st.executeQuery()) {
          reportDeadLetters(st);
          while (rs.next()) {
            int j = rs.getInt(1) - 1;
            Message m = acks.get(sent.get(j)).message();
            out[sent.get(j)] = new AckResult(m.partitionId(), m.offset(), AckOutcome.valueOf(rs.getString(2)));
          }
        }
      }
    }
    return List.of(out);
  }

  /**
   * Binds acknowledgements (all under leases) as six array parameters from {@code first} on: partition
   * ids, groups, offsets, lease ids, statuses, errors (the argument order of the {@code ack} function).
   */
  public static void bindAcks(Connection c, PreparedStatement st, int first, List<AckRequest> acks) throws SQLException {
    int k = acks.size();
    Long[] pids = new Long[k];
    String[] groups = new String[k];
    Long[] offsets = new Long[k];
    String[] leases = new String[k];
    String[] statuses = new String[k];
    String[] errors = new String[k];
    for (int j = 0; j < k; j++) {
      AckRequest a = acks.get(j);
      pids[j] = a.message().partitionId();
      groups[j] = a.message().consumerGroup();
      offsets[j] = a.message().offset();
      leases[j] = a.message().leaseId().toString();
      statuses[j] = a.status().name();
      errors[j] = a.error();
    }
    st.setArray(first, c.createArrayOf("bigint", pids));
    st.setArray(first + 1, c.createArrayOf("text", groups));
    st.setArray(first + 2, c.createArrayOf("bigint", offsets));
    st.setArray(first + 3, c.createArrayOf("text", leases));
    st.setArray(first + 4, c.createArrayOf("text", statuses));
    st.setArray(first + 5, c.createArrayOf("text", errors));
  }

  // ---------------------------------------------------------------------------------- renew, release

  /** Renews leases; returns how many were still held and got extended. */
  public int renew(List<Message> leased) {
    if (leased.isEmpty()) {
      return 0;
    }
    return Sql.idempotent(ds, "renew", true, c -> leaseCall(c, renewSql, leased, true));
  }

  /** Gives leases back without counting an attempt. */
  public int release(List<Message> leased) {
    if (leased.isEmpty()) {
      return 0;
    }
    return Sql.idempotent(ds, "release", true, c -> leaseCall(c, releaseSql, leased, false));
  }

  private static int leaseCall(Connection c, String sql, List<Message> leased, boolean countRows) throws SQLException {
    int n = leased.size();
    Long[] pids = new Long[n];
    String[] groups = new String[n];
    String[] leases = new String[n];
    for (int i = 0; i < n; i++) {
      Message m = leased.get(i);
      pids[i] = m.partitionId();
      groups[i] = m.consumerGroup();
      leases[i] = m.leaseId().toString();
    }
    try (PreparedStatement st = c.prepareStatement(sql)) {
      Array a1 = c.createArrayOf("bigint", pids);
      st.setArray(1, a1);
      st.setArray(2, c.createArrayOf("text", groups));
      st.setArray(3, c.createArrayOf("text", leases));
      try (ResultSet rs = st.executeQuery()) {
        int count = 0;
        while (rs.next()) {
          count += countRows ? 1 : rs.getInt(1);
        }
        return count;
      }
    }
  }

  /**
   * Gives back every lease this node holds (any queue, any group) without counting an attempt, in one
   * statement bounded by {@code timeoutMillis}; returns how many. For {@code Queen.close()}: leases taken
   * by a manual {@code pop()} are released too, so other nodes need not wait for them to expire. Only
   * while this start ({@code incarnation}) still holds the node's row: when another process took the id
   * over (this one was paused past its session timeout), the leases under this id are that process's.
   */
  public int releaseOwned(long timeoutMillis, java.util.UUID incarnation) {
    return Sql.autoCommit(ds, "release on close", c -> {
      // the rows are locked in key order first, as every statement that locks several cursor rows does, so two such statements cannot deadlock
      try (PreparedStatement st = c.prepareStatement("with mine as (select partition_id, group_name from " + schema
          + ".cursors where lease_owner = ? and lease_id is not null"
          + " and exists (select 1 from " + schema + ".nodes n where n.node_id = ? and n.incarnation = ?)"
          + " order by partition_id, group_name for update)"
          + " update " + schema + ".cursors cu set lease_id = null, lease_owner = null, lease_expires_at = null,"
          + " lease_from = null, lease_to = null, lease_redrive = null, acked_ahead = null"
          + " from mine m where cu.partition_id = m.partition_id and cu.group_name = m.group_name")) {
        st.setQueryTimeout((int) Math.max(1, (timeoutMillis + 999) / 1000));
        st.setString(1, node);
        st.setString(2, node);
        st.setObject(3, incarnation);
        return st.executeUpdate();
      }
    });
  }

  /**
   * Sets whether an expired lease counts as an attempt for the group, creating the group the way its
   * first pop would; false when the queue does not exist yet (nothing is created then).
   */
  public boolean groupExpiry(PopRequest r, boolean counts) {
    return Sql.autoCommit(ds, "group expiry", c -> {
      try (PreparedStatement st = c.prepareStatement("select " + schema + ".group_expiry(?, ?, ?, ?, ?)")) {
        st.setString(1, r.queue());
        st.setString(2, r.group());
        st.setString(3, r.mode());
        st.setTimestamp(4, r.from() == null ? null : Timestamp.from(r.from()));
        st.setBoolean(5, counts);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          return rs.getBoolean(1);
        }
      }
    });
  }

  /** A popped message's transaction id: one stored under a receipt has none in its row, and is its id. */
  private static String transactionId(String stored, UUID id) {
    return stored != null ? stored : id.toString();
  }

  /** How a person reads a queue and group in a log line: the default group is named as such. */
  public static String where(String queue, String group) {
    return Queen.DEFAULT_GROUP.equals(group) ? "queue '" + queue + "' (default group)"
        : "queue '" + queue + "' group '" + group + "'";
  }
}
