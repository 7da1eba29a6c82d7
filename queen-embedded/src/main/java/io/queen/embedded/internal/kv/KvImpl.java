package io.queen.embedded.internal.kv;

import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvOptions;
import io.queen.KvPage;
import io.queen.KvWriteResult;
import io.queen.embedded.internal.db.Sql;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * {@link Kv} on the application's {@link DataSource}: each call is one statement on an auto-commit
 * connection, so one transaction, retried after a serialization failure or deadlock like every
 * transaction Queen owns. Arguments are checked before a connection is taken. Nothing is cached.
 * {@link KvOptions#isRequired()} means nothing outside a {@link io.queen.Transaction} and is ignored.
 * After the node is closed every call throws {@link io.queen.BrokerClosedException}.
 *
 * <p>Thread-safe.
 */
public final class KvImpl implements Kv {
  private final DataSource ds;
  private final KvStore store;
  private final Runnable guard;

  public KvImpl(DataSource ds, KvStore store) {
    this(ds, store, () -> { });
  }

  /** @param guard runs first in every call; throws when the node is closed ({@link io.queen.BrokerClosedException}) */
  public KvImpl(DataSource ds, KvStore store, Runnable guard) {
    this.ds = Objects.requireNonNull(ds, "ds must not be null");
    this.store = Objects.requireNonNull(store, "store must not be null");
    this.guard = Objects.requireNonNull(guard, "guard must not be null");
  }

  @Override
  public KvEntry get(String namespace, String key) {
    guard.run();
    KvStore.checkKey(namespace, key);
    return Sql.autoCommit(ds, "kv.get", c -> store.get(c, namespace, key));
  }

  @Override
  public List<KvEntry> getMany(String namespace, Collection<String> keys) {
    guard.run();
    List<String> ks = KvStore.checkKeys(namespace, keys);
    if (ks.isEmpty()) {
      return List.of();
    }
    return Sql.autoCommit(ds, "kv.getMany", c -> store.getMany(c, namespace, ks));
  }

  @Override
  public KvPage getPrefix(String namespace, String prefix, String after, int limit) {
    guard.run();
    return Sql.autoCommit(ds, "kv.getPrefix", c -> store.getPrefix(c, namespace, prefix, after, limit));
  }

  @Override
  public KvWriteResult put(String namespace, String key, Object value, KvOptions options) {
    guard.run();
    return write("kv.put", store.preparePut(namespace, key, value, options));
  }

  @Override
  public KvWriteResult putIfAbsent(String namespace, String key, Object value, KvOptions options) {
    guard.run();
    return write("kv.putIfAbsent", store.preparePutIfAbsent(namespace, key, value, options));
  }

  @Override
  public KvWriteResult incr(String namespace, String key, long delta, KvOptions options) {
    guard.run();
    return write("kv.incr", store.prepareIncr(namespace, key, delta, options));
  }

  @Override
  public KvWriteResult delete(String namespace, String key) {
    guard.run();
    return write("kv.delete", store.prepareDelete(namespace, key, null, false));
  }

  @Override
  public KvWriteResult delete(String namespace, String key, long expectVersion) {
    guard.run();
    return write("kv.delete", store.prepareDelete(namespace, key, expectVersion, false));
  }

  private KvWriteResult write(String operation, KvWrite w) {
    return Sql.autoCommit(ds, operation, c -> store.write(c, w));
  }
}
