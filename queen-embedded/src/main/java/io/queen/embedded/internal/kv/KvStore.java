package io.queen.embedded.internal.kv;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.BooleanNode;
import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvOptions;
import io.queen.KvPage;
import io.queen.KvReason;
import io.queen.KvWriteResult;
import io.queen.Names;
import io.queen.embedded.internal.db.Sql;
import io.queen.embedded.internal.log.Broker;
import io.queen.embedded.internal.log.JsonCodec;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Every KV operation as a method on a given {@link Connection}, so the same code runs as its own
 * transaction ({@link KvImpl}) or inside a bundle ({@code TransactionImpl}). The write rules live in
 * the SQL functions {@code kv_*} ({@code sql/functions/}); this class checks arguments first (so a bad call fails
 * before anything is sent) and maps rows to the API's records. Values are never cached.
 *
 * <p>Thread-safe (stateless apart from its configuration); the connections are the caller's. About 600 lines: one
 * argument check and one row mapping per KV operation, which read best side by side.
 */
public final class KvStore {
  /** The largest value, in bytes of JSON text (UTF-8): {@value} (64 KiB). */
  public static final int MAX_VALUE_BYTES = 64 * 1024;
  /** The most keys one {@code getMany} may ask for: {@value}. */
  public static final int MAX_MANY_KEYS = Kv.MAX_PAGE;
  /** The message of a write called without options. */
  private static final String NO_OPTIONS = "options: every write carries exactly one expiry; pass Kv.ttl(duration) or"
      + " Kv.forever(), with expect(...), max(...) or required() added to it";

  /** SQLState of the argument checks in the {@code kv_*} functions (invalid_parameter_value). */
  static final String INVALID_ARGUMENT = "22023";
  private static final String TRUE_JSON = "true";
  /** SQLState of a duplicate key: in the marker path, a marker's key already has a row. */
  static final String UNIQUE_VIOLATION = "23505";
  /** SQLState raised by {@code bundle_lease_lost()} when the marker path meets a lost lease. */
  static final String BUNDLE_LEASE_LOST = "QB002";

  private final JsonCodec codec;
  private final long maxReadBytes;
  private final String getSql;
  private final String getManySql;
  private final String prefixSql;
  private final String prefixOpenSql;
  private final String putSql;
  private final String writeManySql;
  private final String bundleSql;
  private final String markersSql;
  private final String markersOfTrueSql;
  private final String putIfAbsentSql;
  private final String incrSql;
  private final String deleteSql;

  /**
   * @param schema the schema holding {@code kv} (unquoted; it was validated by the builder)
   * @param codec values to and from JSON
   * @param maxReadBytes the byte ceiling of one prefix page ({@code kvMaxReadBytes})
   */
  public KvStore(String schema, JsonCodec codec, long maxReadBytes) {
    this.codec = Objects.requireNonNull(codec, "codec must not be null");
    if (maxReadBytes < 1) {
      throw new IllegalArgumentException("maxReadBytes must be above zero, was " + maxReadBytes);
    }
    this.maxReadBytes = maxReadBytes;
    String s = Sql.quoteIdent(Objects.requireNonNull(schema, "schema must not be null"));
    String live = "(k.expires_at is null or k.expires_at > now())";
    this.getSql = "select k.value::text, k.version, k.expires_at from " + s + ".kv k"
        + " where k.namespace = ? and k.key = ?::text collate \"C\" and " + live;
    this.getManySql = "select r.key, k.value::text, k.version, k.expires_at"
        + " from unnest(?::text[]) with ordinality as r(key, ord)"
        + " left join " + s + ".kv k on k.namespace = ? and k.key = r.key collate \"C\" and " + live
        + " order by r.ord";
    String page = "with page as ("
        + " select k.key, k.value::text as v, k.version, k.expires_at,"
        + "        octet_length(k.key) + octet_length(k.value::text) as bytes"
        + "   from " + s + ".kv k"
        + "  where k.namespace = ?"
        + "    and k.key >= ?::text collate \"C\" and k.key > ?::text collate \"C\"%s"
        + "    and starts_with(k.key, ?::text) and " + live
        + "  order by k.key limit ?),"
        + " acc as (select p.*, row_number() over w as rn, sum(p.bytes) over w as running, count(*) over () as total"
        + "   from page p window w as (order by p.key rows between unbounded preceding and current row))"
        + " select key, v, version, expires_at, total from acc"
        + "  where rn <= ? and (rn = 1 or running <= ?) order by key";
    this.prefixSql = String.format(Locale.ROOT, page, " and k.key < ?::text collate \"C\"");
    this.prefixOpenSql = String.format(Locale.ROOT, page, "");
    String cols = "select applied, reason, found, value::text, version, expires_at from " + s;
    this.putSql = cols + ".kv_put(?::text, ?::text, ?::text, ?::bigint, ?::boolean, ?::bigint)";
    this.putIfAbsentSql = cols + ".kv_put_if_absent(?::text, ?::text, ?::text, ?::bigint, ?::boolean)";
    this.incrSql = cols + ".kv_incr(?::text, ?::text, ?::bigint, ?::bigint, ?::boolean, ?::bigint)";
    this.deleteSql = cols + ".kv_delete(?::text, ?::text, ?::bigint)";
    this.writeManySql = "select op_index, w_applied, w_reason, w_found, w_value, w_version, w_expires_at from " + s
        + ".kv_write_many(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::boolean[],"
        + " ?::bigint[], ?::bigint[], ?::boolean[])";
    this.bundleSql = "select kind, op_index, w_applied, w_reason, w_found, w_value, w_version, w_expires_at, ack_outcome,"
        + " fail from " + s + ".bundle_kv_ack_fenced(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[],"
        + " ?::boolean[], ?::bigint[], ?::bigint[], ?::boolean[], ?::bigint[], ?::text[], ?::bigint[], ?::text[]::uuid[],"
        + " ?::text[], ?::text[])";
    this.markersSql = markersSql(s, true);
    this.markersOfTrueSql = markersSql(s, false);
  }

  // ------------------------------------------------------------------------------------ preparing

  /** A put (unconditional, or with {@link KvOptions#expect}). */
  public KvWrite preparePut(String namespace, String key, Object value, KvOptions options) {
    checkKey(namespace, key);
    Objects.requireNonNull(options, NO_OPTIONS);
    noMax("put", options);
    return new KvWrite(KvWrite.Op.PUT, namespace, key, valueJson(value), 0, ttlMillis(options),
        options.expectVersion(), null, options.isRequired());
  }

  /** A putIfAbsent (once): {@code expect} is implied (absent) and must not be given. */
  public KvWrite preparePutIfAbsent(String namespace, String key, Object value, KvOptions options) {
    checkKey(namespace, key);
    Objects.requireNonNull(options, NO_OPTIONS);
    noMax("putIfAbsent", options);
    if (options.expectVersion() != null) {
      throw new IllegalArgumentException("putIfAbsent takes no expect: it already expects the key to be absent"
          + " (use put with expect(version) to replace a known version)");
    }
    return new KvWrite(KvWrite.Op.PUT_IF_ABSENT, namespace, key, valueJson(value), 0, ttlMillis(options), null,
        null, options.isRequired());
  }

  /** An incr: no {@code expect} (incr exists to remove the compare-and-set loop); optional max. */
  public KvWrite prepareIncr(String namespace, String key, long delta, KvOptions options) {
    checkKey(namespace, key);
    Objects.requireNonNull(options, NO_OPTIONS);
    if (options.expectVersion() != null) {
      throw new IllegalArgumentException("incr takes no expect: it is atomic, and a precondition would bring back"
          + " the retry loop it exists to remove");
    }
    return new KvWrite(KvWrite.Op.INCR, namespace, key, null, delta, ttlMillis(options), null, options.max(),
        options.isRequired());
  }

  /** A delete, with an optional expected version (at least 1). */
  public KvWrite prepareDelete(String namespace, String key, Long expectVersion, boolean required) {
    checkKey(namespace, key);
    if (expectVersion != null && expectVersion < 1) {
      throw new IllegalArgumentException("delete: expect version must be >= 1 (a live key's version), was "
          + expectVersion);
    }
    return new KvWrite(KvWrite.Op.DELETE, namespace, key, null, 0, null, expectVersion, null, required);
  }

  /** Checks a namespace and a key (charset and length). */
  public static void checkKey(String namespace, String key) {
    Names.namespace(namespace);
    Names.key(key);
  }

  private String valueJson(Object value) {
    if (value == Boolean.TRUE) {
      return TRUE_JSON; // once(): the idempotency marker, on every message of a batch
    }
    // null is stored as a JSON null; text that jsonb or the reader would refuse is a PayloadSerializationException
    JsonCodec.Encoded json = codec.encode(value, "value", MAX_VALUE_BYTES);
    if (json.tooLarge()) {
      throw new IllegalArgumentException("value is " + json.bytes() + " bytes of JSON; the limit is " + MAX_VALUE_BYTES
          + " (64 KiB)");
    }
    return json.text();
  }

  private static Long ttlMillis(KvOptions o) {
    if (o.isForever()) {
      return null;
    }
    Duration ttl = o.ttl();
    try {
      return ttl.toMillis();
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException("ttl " + ttl + " is too long: use Kv.forever()", e);
    }
  }

  private static void noMax(String op, KvOptions o) {
    if (o.max() != null) {
      throw new IllegalArgumentException(op + " takes no max: max is the ceiling of incr");
    }
  }

  // -------------------------------------------------------------------------------------- writing

  /** Runs a prepared write on {@code c} (inside whatever transaction {@code c} is in). */
  public KvWriteResult write(Connection c, KvWrite w) throws SQLException {
    String sql = switch (w.op()) {
      case PUT -> putSql;
      case PUT_IF_ABSENT -> putIfAbsentSql;
      case INCR -> incrSql;
      case DELETE -> deleteSql;
    };
    try (PreparedStatement st = c.prepareStatement(sql)) {
      st.setString(1, w.namespace());
      st.setString(2, w.key());
      switch (w.op()) {
        case PUT, PUT_IF_ABSENT -> {
          st.setString(3, w.valueJson());
          setExpiry(st, 4, w);
          if (w.op() == KvWrite.Op.PUT) {
            setLong(st, 6, w.expect());
          }
        }
        case INCR -> {
          st.setLong(3, w.delta());
          setExpiry(st, 4, w);
          setLong(st, 6, w.max());
        }
        case DELETE -> setLong(st, 3, w.expect());
      }
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          throw new SQLException("kv " + w.op() + " returned no row");
        }
        boolean applied = rs.getBoolean(1);
        String reason = rs.getString(2);
        boolean found = rs.getBoolean(3);
        return new KvWriteResult(w.key(), applied, reason == null ? null : KvReason.valueOf(reason.toUpperCase(Locale.ROOT)),
            found, found ? codec.parse(rs.getString(4)) : null, rs.getLong(5), instant(rs, 6));
      }
    } catch (SQLException e) {
      throw argumentError(e);
    }
  }

  /**
   * Runs consecutive writes of a bundle in one call, in order, on {@code c}. Stops after the first write
   * that is required and did not apply (the results end there), as the bundle does.
   */
  public List<KvWriteResult> writeMany(Connection c, List<KvWrite> ws) throws SQLException {
    if (ws.size() == 1) {
      return List.of(write(c, ws.get(0)));
    }
    int n = ws.size();
    try (PreparedStatement st = c.prepareStatement(writeManySql)) {
      bindWrites(c, st, ws);
      List<KvWriteResult> out = new ArrayList<>(n);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(writeResult(ws.get(rs.getInt(1) - 1), rs, 2));
        }
      }
      return out;
    } catch (SQLException e) {
      throw argumentError(e);
    }
  }

  /**
   * What {@link #writeThenAck} did: the writes' results, the acks' results, and "kv", "lease", "done" (an ack's message
   * was finished by another consumer) or null.
   */
  public record BundleResult(List<KvWriteResult> writes, List<io.queen.AckResult> acks, String fail) {}

  /**
   * KV writes then acks (all under leases) in one auto-commit call of {@code bundle_kv_ack_fenced}: everything
   * applies, or nothing does and {@code fail} says whether a required write or a lease failed it.
   */
  public BundleResult writeThenAck(Connection c, List<KvWrite> ws, List<Broker.AckRequest> acks)
      throws SQLException {
    int n = ws.size();
    int k = acks.size();
    try (PreparedStatement st = c.prepareStatement(bundleSql)) {
      bindWrites(c, st, ws);
      Broker.bindAcks(c, st, 11, acks);
      List<KvWriteResult> out = new ArrayList<>(n);
      io.queen.AckResult[] ackOut = new io.queen.AckResult[k];
      int acked = 0;
      String fail = null;
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          fail = rs.getString(10);
          int idx = rs.getInt(2) - 1;
          if ("kv".equals(rs.getString(1))) {
            out.add(writeResult(ws.get(idx), rs, 3));
          } else {
            var m = acks.get(idx).message();
            ackOut[idx] = new io.queen.AckResult(m.partitionId(), m.offset(), io.queen.AckOutcome.valueOf(rs.getString(9)));
            acked++;
          }
        }
      }
      return new BundleResult(List.copyOf(out), acked == k ? List.of(ackOut) : List.of(), fail);
    } catch (SQLException e) {
      throw argumentError(e);
    }
  }

  /**
   * The marker path's statement. The KV insert runs first (the lateral reference to its count makes the ack wait for
   * it), in the same order as {@code bundle_kv_ack_fenced}: writes, then acks. The first row carries the statement's
   * {@code now()} and, with {@code storedValues}, the markers as stored: jsonb may store a value differently from its
   * text ({@code 1.0E7} as {@code 10000000}); {@code true}, once()'s value, it stores as is.
   */
  private static String markersSql(String s, boolean storedValues) {
    // versions from the store's sequence, as every KV write: never one a key had before
    String w = "with w as (insert into " + s + ".kv (namespace, key, value, version, expires_at)"
        + " select x.ns, x.k, x.v::jsonb, nextval('" + s + ".kv_versions'), now() + x.ttl * interval '1 millisecond'"
        + " from unnest(?::text[], ?::text[], ?::text[], ?::bigint[]) as x(ns, k, v, ttl)"
        + " returning namespace, key, version" + (storedValues ? ", value::text as v" : "") + "),";
    String n = " n as (select count(*) as made, array_agg(namespace) as nss, array_agg(key) as ks,"
        + " array_agg(version) as vers" + (storedValues ? ", array_agg(v) as vs" : "") + " from w)";
    String first = ", case when a.idx = 1 then n.made end, case when a.idx = 1 then n.nss end,"
        + " case when a.idx = 1 then n.ks end, case when a.idx = 1 then n.vers end"
        + (storedValues ? ", case when a.idx = 1 then n.vs end" : "");
    return w + n + " select a.idx, a.outcome, case when a.idx = 1 then now() end" + first
        + " from n cross join lateral " + s + ".ack("
        + "case when n.made >= 0 then ?::bigint[] end, ?::text[], ?::bigint[], ?::text[]::uuid[], ?::text[], ?::text[]) a"
        + " where case when a.outcome in ('LEASE_LOST', 'ALREADY_ACKED') then " + s + ".bundle_lease_lost() else true end";
  }

  /**
   * The marker fast path of {@link #writeThenAck}, for put-if-absent writes only (once() per message + the batch's
   * acks): one plain auto-commit statement, a multi-row insert of the markers and the ack call, with no PL/pgSQL for the
   * KV part (see {@code bundle_lease_lost.sql}). It applies whole, and then every write applied (its version from the
   * store's sequence, the value as stored), or it applies nothing and returns {@code null}: a key had a row (any row:
   * live, expired, or just committed by a concurrent bundle), a lease was lost, or an ack answered ALREADY_ACKED. The
   * caller then runs {@link #writeThenAck}, which says exactly which and why (and applies a bundle whose ALREADY_ACKED
   * came under its own live lease). Call it on an auto-commit connection only.
   */
  public BundleResult markersThenAck(Connection c, List<KvWrite> ws, List<Broker.AckRequest> acks)
      throws SQLException {
    int n = ws.size();
    int k = acks.size();
    String[] ns = new String[n];
    String[] keys = new String[n];
    String[] values = new String[n];
    Long[] ttl = new Long[n];
    boolean allTrue = true;
    for (int i = 0; i < n; i++) {
      KvWrite w = ws.get(i);
      if (w.op() != KvWrite.Op.PUT_IF_ABSENT) {
        throw new IllegalArgumentException("the marker path takes put-if-absent writes only, got " + w.op());
      }
      ns[i] = w.namespace();
      keys[i] = w.key();
      values[i] = w.valueJson();
      ttl[i] = w.ttlMillis();
      allTrue &= TRUE_JSON.equals(w.valueJson());
    }
    try (PreparedStatement st = c.prepareStatement(allTrue ? markersOfTrueSql : markersSql)) {
      st.setArray(1, c.createArrayOf("text", ns));
      st.setArray(2, c.createArrayOf("text", keys));
      st.setArray(3, c.createArrayOf("text", values));
      st.setArray(4, c.createArrayOf("bigint", ttl));
      Broker.bindAcks(c, st, 5, acks);
      io.queen.AckResult[] ackOut = new io.queen.AckResult[k];
      Instant now = null;
      long made = -1;
      java.util.Map<String, String> stored = allTrue ? null : new java.util.HashMap<>();
      java.util.Map<String, Long> versions = new java.util.HashMap<>();
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          int idx = rs.getInt(1) - 1;
          var m = acks.get(idx).message();
          ackOut[idx] = new io.queen.AckResult(m.partitionId(), m.offset(), io.queen.AckOutcome.valueOf(rs.getString(2)));
          if (idx == 0) {
            now = instant(rs, 3);
            made = rs.getLong(4);
            String[] nss = (String[]) rs.getArray(5).getArray();
            String[] ks = (String[]) rs.getArray(6).getArray();
            Long[] vers = (Long[]) rs.getArray(7).getArray();
            String[] vs = allTrue ? null : (String[]) rs.getArray(8).getArray();
            for (int j = 0; j < ks.length; j++) {
              versions.put(nss[j] + '\0' + ks[j], vers[j]);
              if (!allTrue) {
                stored.put(nss[j] + '\0' + ks[j], vs[j]);
              }
            }
          }
        }
      }
      if (now == null || made != n) {
        throw new IllegalStateException("the marker statement answered " + made + " of " + n + " markers and "
            + (now == null ? "no" : "its") + " acknowledgements");
      }
      List<KvWriteResult> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        KvWrite w = ws.get(i);
        JsonNode value = allTrue ? BooleanNode.TRUE : codec.parse(stored.get(w.namespace() + '\0' + w.key()));
        out.add(new KvWriteResult(w.key(), true, null, true, value, versions.get(w.namespace() + '\0' + w.key()),
            w.ttlMillis() == null ? null : now.plusMillis(w.ttlMillis())));
      }
      return new BundleResult(List.copyOf(out), List.of(ackOut), null);
    } catch (SQLException e) {
      if (UNIQUE_VIOLATION.equals(e.getSQLState()) || BUNDLE_LEASE_LOST.equals(e.getSQLState())) {
        return null;
      }
      throw argumentError(e);
    }
  }

  /** Binds the writes as the first ten array parameters of kv_write_many / bundle_kv_ack_fenced, in that order. */
  private static void bindWrites(Connection c, PreparedStatement st, List<KvWrite> ws) throws SQLException {
    int n = ws.size();
    String[] ops = new String[n];
    String[] ns = new String[n];
    String[] keys = new String[n];
    String[] values = new String[n];
    Long[] delta = new Long[n];
    Long[] ttl = new Long[n];
    Boolean[] forever = new Boolean[n];
    Long[] expect = new Long[n];
    Long[] max = new Long[n];
    Boolean[] required = new Boolean[n];
    for (int i = 0; i < n; i++) {
      KvWrite w = ws.get(i);
      ops[i] = w.op().name();
      ns[i] = w.namespace();
      keys[i] = w.key();
      values[i] = w.valueJson();
      delta[i] = w.delta();
      ttl[i] = w.ttlMillis();
      forever[i] = w.forever();
      expect[i] = w.expect();
      max[i] = w.max();
      required[i] = w.required();
    }
    st.setArray(1, c.createArrayOf("text", ops));
    st.setArray(2, c.createArrayOf("text", ns));
    st.setArray(3, c.createArrayOf("text", keys));
    st.setArray(4, c.createArrayOf("text", values));
    st.setArray(5, c.createArrayOf("bigint", delta));
    st.setArray(6, c.createArrayOf("bigint", ttl));
    st.setArray(7, c.createArrayOf("boolean", forever));
    st.setArray(8, c.createArrayOf("bigint", expect));
    st.setArray(9, c.createArrayOf("bigint", max));
    st.setArray(10, c.createArrayOf("boolean", required));
  }

  /** One result row of kv_write_many / bundle_kv_ack_fenced, read from column {@code at} on (applied .. expires_at). */
  private KvWriteResult writeResult(KvWrite w, ResultSet rs, int at) throws SQLException {
    String reason = rs.getString(at + 1);
    boolean found = rs.getBoolean(at + 2);
    return new KvWriteResult(w.key(), rs.getBoolean(at), reason == null ? null : KvReason.valueOf(reason.toUpperCase(Locale.ROOT)),
        found, found ? codec.parse(rs.getString(at + 3)) : null, rs.getLong(at + 4), instant(rs, at + 5));
  }

  private static void setExpiry(PreparedStatement st, int at, KvWrite w) throws SQLException {
    setLong(st, at, w.ttlMillis());
    st.setBoolean(at + 1, w.forever());
  }

  private static void setLong(PreparedStatement st, int at, Long v) throws SQLException {
    if (v == null) {
      st.setNull(at, Types.BIGINT);
    } else {
      st.setLong(at, v);
    }
  }

  /** An argument check of the SQL functions failed: the caller's mistake, not the database's. */
  private static SQLException argumentError(SQLException e) {
    String state = e.getSQLState();
    // 22023: a check of the kv_* functions; 22P02/22P05: JSON that jsonb refuses (e.g. the escape backslash-u0000)
    if (INVALID_ARGUMENT.equals(state) || "22P02".equals(state) || "22P05".equals(state)) {
      SQLException safe = Sql.sanitize(e); // PostgreSQL's Where line would quote the value
      throw new IllegalArgumentException(safe.getMessage(), safe);
    }
    return e;
  }

  // -------------------------------------------------------------------------------------- reading

  /** One key; {@code found=false} when absent or expired. */
  public KvEntry get(Connection c, String namespace, String key) throws SQLException {
    checkKey(namespace, key);
    try (PreparedStatement st = c.prepareStatement(getSql)) {
      st.setString(1, namespace);
      st.setString(2, key);
      try (ResultSet rs = st.executeQuery()) {
        if (!rs.next()) {
          return absent(key);
        }
        return new KvEntry(key, true, codec.parse(rs.getString(1)), rs.getLong(2), instant(rs, 3));
      }
    }
  }

  /** Checks the keys of a {@code getMany} and copies them (at most {@value #MAX_MANY_KEYS}). */
  public static List<String> checkKeys(String namespace, Collection<String> keys) {
    Names.namespace(namespace);
    Objects.requireNonNull(keys, "keys must not be null");
    if (keys.size() > MAX_MANY_KEYS) {
      throw new IllegalArgumentException("getMany: at most " + MAX_MANY_KEYS + " keys, was " + keys.size());
    }
    List<String> copy = new ArrayList<>(keys.size());
    for (String k : keys) {
      copy.add(Names.key(k));
    }
    return copy;
  }

  /** One row per requested key, in request order (duplicates included). */
  public List<KvEntry> getMany(Connection c, String namespace, Collection<String> keys) throws SQLException {
    List<String> ks = checkKeys(namespace, keys);
    if (ks.isEmpty()) {
      return List.of();
    }
    List<KvEntry> out = new ArrayList<>(ks.size());
    try (PreparedStatement st = c.prepareStatement(getManySql)) {
      st.setArray(1, c.createArrayOf("text", ks.toArray()));
      st.setString(2, namespace);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          String key = rs.getString(1);
          String v = rs.getString(2);
          out.add(v == null ? absent(key) : new KvEntry(key, true, codec.parse(v), rs.getLong(3), instant(rs, 4)));
        }
      }
    }
    return out;
  }

  /**
   * A page of the live keys starting with {@code prefix}, in byte order (C collation), after
   * {@code after} (exclusive), at most {@code limit} keys (clamped to 1..{@value Kv#MAX_PAGE}) and at
   * most {@code maxReadBytes} bytes of keys and values (the first key is always returned, so paging
   * always progresses). One statement: each page is its own snapshot.
   */
  public KvPage getPrefix(Connection c, String namespace, String prefix, String after, int limit) throws SQLException {
    Names.namespace(namespace);
    if (prefix == null || prefix.isEmpty()) {
      throw new IllegalArgumentException("getPrefix requires a non-empty prefix: a namespace is not a table to enumerate");
    }
    if (prefix.getBytes(StandardCharsets.UTF_8).length > Names.MAX_KEY_BYTES || prefix.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("prefix must be at most " + Names.MAX_KEY_BYTES + " UTF-8 bytes, without NUL");
    }
    if (after != null) {
      Names.key(after);
    }
    int n = Math.max(1, Math.min(Kv.MAX_PAGE, limit));
    String upper = upperBound(prefix);
    List<KvEntry> rows = new ArrayList<>();
    long total = 0;
    try (PreparedStatement st = c.prepareStatement(upper == null ? prefixOpenSql : prefixSql)) {
      int i = 1;
      st.setString(i++, namespace);
      st.setString(i++, prefix);
      st.setString(i++, after == null ? "" : after);
      if (upper != null) {
        st.setString(i++, upper);
      }
      st.setString(i++, prefix);
      st.setInt(i++, n + 1);
      st.setInt(i++, n);
      st.setLong(i, maxReadBytes);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          rows.add(new KvEntry(rs.getString(1), true, codec.parse(rs.getString(2)), rs.getLong(3), instant(rs, 4)));
          total = rs.getLong(5);
        }
      }
    }
    boolean truncated = rows.size() < total;
    return new KvPage(List.copyOf(rows), truncated, truncated ? rows.get(rows.size() - 1).key() : null);
  }

  /**
   * The smallest string greater than every string that starts with {@code prefix}, in code point order
   * (which is byte order of UTF-8, the C collation): the prefix with its last code point incremented,
   * after dropping trailing U+10FFFF. {@code null} when there is none.
   */
  static String upperBound(String prefix) {
    int[] cps = prefix.codePoints().toArray();
    for (int i = cps.length - 1; i >= 0; i--) {
      if (cps[i] < Character.MAX_CODE_POINT) {
        int next = cps[i] + 1;
        if (next == Character.MIN_SURROGATE) {
          next = Character.MAX_SURROGATE + 1; // surrogates are not characters in UTF-8
        }
        cps[i] = next;
        return new String(cps, 0, i + 1);
      }
    }
    return null;
  }

  private static KvEntry absent(String key) {
    return new KvEntry(key, false, null, 0, null);
  }

  private static Instant instant(ResultSet rs, int col) throws SQLException {
    OffsetDateTime t = rs.getObject(col, OffsetDateTime.class);
    return t == null ? null : t.toInstant();
  }
}
