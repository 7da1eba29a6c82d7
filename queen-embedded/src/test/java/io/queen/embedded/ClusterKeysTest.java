package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.queen.EncryptionException;
import io.queen.Message;
import io.queen.PushItem;
import io.queen.Queen;
import io.queen.Subscription;
import io.queen.embedded.internal.log.PayloadCipher;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Keys that cannot split a cluster: a node whose key is not one of the cluster's is refused at start with
 * the key ids named and stores nothing; the first key and the next one of a rotation are adopted explicitly; a pop
 * leases no partition whose next message needs a key the node lacks, so such a partition never holds up the others;
 * status and a gauge show the messages that wait for a key.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClusterKeysTest {
  private static final String KEY_A = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  private static final String KEY_B = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
  private static final String KEY_C = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
  private static final String ID_A = PayloadCipher.keyId(HexFormat.of().parseHex(KEY_A));
  private static final String ID_B = PayloadCipher.keyId(HexFormat.of().parseHex(KEY_B));
  private static final String ID_C = PayloadCipher.keyId(HexFormat.of().parseHex(KEY_C));
  private static final String SECRET = "4111-1111-1111-1111";

  private DataSource ds;
  private String q;
  private final List<Queen> nodes = new ArrayList<>();

  @BeforeEach
  void start(DataSource ds, TestInfo info) throws Exception {
    this.ds = ds;
    q = "keys-" + info.getTestMethod().orElseThrow().getName();
    // every test starts from a cluster that has adopted no key (the tests of this class share a database)
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("do $$ begin if to_regclass('queen.encryption_keys') is not null then"
          + " delete from queen.encryption_keys; end if; end $$");
    }
  }

  @AfterEach
  void stop() {
    nodes.forEach(Queen::close);
  }

  private EmbeddedQueen.Builder builder(String id, String key, String... oldKeys) {
    EmbeddedQueen.Builder b = EmbeddedQueen.builder().dataSource(ds).nodeId(id).encryptionKey(key).listen(false)
        .janitor(false);
    if (oldKeys.length > 0) {
      b.oldEncryptionKeys(oldKeys);
    }
    return b;
  }

  private Queen node(EmbeddedQueen.Builder b) {
    Queen n = b.start();
    nodes.add(n);
    return n;
  }

  private Queen node(String id, String key, String... oldKeys) {
    return node(builder(id, key, oldKeys));
  }

  private Queen adopting(String id, String key, String... oldKeys) {
    return node(builder(id, key, oldKeys).adoptEncryptionKey());
  }

  private List<String> listed() throws Exception {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select key_id from queen.encryption_keys order by adopted_at, key_id")) {
      List<String> out = new ArrayList<>();
      while (rs.next()) {
        out.add(rs.getString(1));
      }
      return out;
    }
  }

  /** The key ids of the queue's stored messages, in partition and offset order. */
  private List<String> stored() throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.key_id from"
        + " queen.messages m join queen.partitions p on p.id = m.partition_id join queen.queues q on q.id = p.queue_id"
        + " where q.name = ? order by p.name, m.\"offset\"")) {
      st.setString(1, q);
      List<String> out = new ArrayList<>();
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getString(1));
        }
      }
      return out;
    }
  }

  private long nodeRows(String id) throws Exception {
    try (Connection c = ds.getConnection();
        PreparedStatement st = c.prepareStatement("select count(*) from queen.nodes where node_id = ?")) {
      st.setString(1, id);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  @Test
  void aNodeWithAnotherKeyIsRefusedAtStartWithTheKeyIdsNamedAndStoresNothing() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    a.queue(q).push(Map.of("card", SECRET));

    assertThatThrownBy(() -> node("wrong", KEY_B))
        .isInstanceOfSatisfying(EncryptionException.class, e -> assertThat(e.queue()).isNull())
        .hasMessageContaining("this node's encryption key has id " + ID_B)
        .hasMessageContaining("not one of this cluster's keys (ids [" + ID_A + "]")
        .hasMessageContaining("adoptEncryptionKey()").hasMessageContaining("was not started")
        .hasMessageNotContaining(KEY_A).hasMessageNotContaining(KEY_B).hasMessageNotContaining(SECRET);
    // adopting is no way round it without a key of the cluster
    assertThatThrownBy(() -> adopting("wrong", KEY_B))
        .isInstanceOf(EncryptionException.class)
        .hasMessageContaining("this node's key id " + ID_B + " would join the cluster's keys (ids [" + ID_A + "])")
        .hasMessageContaining("holds none of them").hasMessageContaining("Nothing was adopted")
        .hasMessageNotContaining(KEY_A).hasMessageNotContaining(KEY_B);

    assertThat(listed()).containsExactly(ID_A);
    assertThat(stored()).containsExactly(ID_A);
    assertThat(nodeRows("wrong")).as("the refused node registered nothing").isZero();
    // the cluster goes on: the message is delivered at its first attempt
    Message m = a.queue(q).consumer().pop().get(0);
    assertThat(m.attempt()).isEqualTo(1);
    assertThat(m.payload().path("card").asText()).isEqualTo(SECRET);
  }

  @Test
  void theFirstKeyIsAdoptedExplicitly() throws Exception {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).encryptionKey(null).adoptEncryptionKey().start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("adoptEncryptionKey needs an encryptionKey");

    Queen a = node("a", KEY_A); // starts: the cluster has adopted no key yet
    a.queue(q).configure(c -> c.encryption(true));
    assertThatThrownBy(() -> a.queue(q).push(Map.of("card", SECRET)))
        .isInstanceOfSatisfying(EncryptionException.class, e -> assertThat(e.queue()).isEqualTo(q))
        .hasMessageContaining("this cluster has adopted no encryption key yet (this node's key id is " + ID_A + ")")
        .hasMessageContaining("adoptEncryptionKey()").hasMessageContaining("nothing was pushed")
        .hasMessageNotContaining(KEY_A).hasMessageNotContaining(SECRET);
    assertThatThrownBy(() -> a.transaction().push(q, "Default", Map.of("card", SECRET)).commit())
        .isInstanceOf(EncryptionException.class).hasMessageContaining("nothing was pushed");
    assertThat(stored()).isEmpty();
    assertThat(listed()).isEmpty();

    adopting("b", KEY_A);
    assertThat(listed()).containsExactly(ID_A);
    a.queue(q).push(Map.of("card", SECRET)); // the running node's key is the adopted one now
    assertThat(stored()).containsExactly(ID_A);
    // adopting a key already adopted changes nothing
    adopting("c", KEY_A);
    assertThat(listed()).containsExactly(ID_A);
  }

  @Test
  void aRotationAdoptsTheNewKeyWhileEveryNodeReadsBoth() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true).leaseTime(Duration.ofMinutes(5)));
    a.queue(q).push(Map.of("n", 1));

    // step 1: the nodes take the new key as an older key, so they read what it seals before anyone seals with it
    Queen reader = node("reader", KEY_A, KEY_B);
    // step 2: one node adopts the new key; it holds the cluster's key too
    Queen rotated = adopting("rotated", KEY_B, KEY_A);
    assertThat(listed()).containsExactly(ID_A, ID_B);
    rotated.queue(q).push(Map.of("n", 2));
    a.queue(q).push(Map.of("n", 3)); // a node not yet restarted still seals under the old key
    assertThat(stored()).containsExactly(ID_A, ID_B, ID_A);
    List<Message> got = reader.queue(q).consumer().batch(10).pop();
    assertThat(got).extracting(m -> m.payload().path("n").asInt()).containsExactly(1, 2, 3);
    reader.ack(got);

    // step 3: a node started with only the new key is one of the cluster's
    Queen onlyNew = node("only-new", KEY_B);
    onlyNew.queue(q).push(Map.of("n", 4));
    assertThat(onlyNew.queue(q).consumer().pop()).extracting(m -> m.payload().path("n").asInt()).containsExactly(4);

    // retiring the old key (its id removed from the list) refuses a node that still runs with it
    try (Connection c = ds.getConnection();
        PreparedStatement st = c.prepareStatement("delete from queen.encryption_keys where key_id = ?")) {
      st.setString(1, ID_A);
      assertThat(st.executeUpdate()).isEqualTo(1);
    }
    assertThatThrownBy(() -> node("stale", KEY_A)).isInstanceOf(EncryptionException.class)
        .hasMessageContaining("has id " + ID_A).hasMessageContaining("(ids [" + ID_B + "]");
  }

  @Test
  void aPartitionSealedUnderAKeyThisNodeLacksNeverHoldsUpTheOthers() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true).retryLimit(1));
    List<PushItem> healthy = new ArrayList<>();
    for (int p = 0; p < 6; p++) {
      for (int i = 0; i < 5; i++) {
        healthy.add(PushItem.of("p" + p, Map.of("p", p, "i", i)));
      }
    }
    a.queue(q).push(healthy);
    a.queue(q).push(List.of(PushItem.of("mixed", Map.of("p", "mixed", "i", 0)),
        PushItem.of("mixed", Map.of("p", "mixed", "i", 1))));
    // a node with a key the others lack (adopted in a rotation whose first step was skipped) seals some messages
    Queen other = adopting("other", KEY_C, KEY_A);
    other.queue(q).push(List.of(PushItem.of("other", Map.of("p", "other", "i", 0)),
        PushItem.of("other", Map.of("p", "other", "i", 1)), PushItem.of("other", Map.of("p", "other", "i", 2)),
        PushItem.of("mixed", Map.of("p", "mixed", "i", 2))));
    a.queue(q).push(List.of(PushItem.of("mixed", Map.of("p", "mixed", "i", 3))));
    other.close();
    nodes.remove(other);

    // pops over several partitions at once: every message a can open comes, none of the others, no error
    Set<String> got = ConcurrentHashMap.newKeySet();
    for (int round = 0; round < 20; round++) {
      List<Message> batch = a.queue(q).consumer().batch(10).partitions(4).waitFor(Duration.ZERO).pop();
      for (Message m : batch) {
        assertThat(m.attempt()).isEqualTo(1);
        assertThat(got.add(m.payload().path("p").asText() + "/" + m.payload().path("i").asInt())).isTrue();
      }
      if (!batch.isEmpty()) {
        a.ack(batch);
      }
    }
    assertThat(got).hasSize(32).contains("mixed/0", "mixed/1").doesNotContain("mixed/2", "mixed/3", "other/0");

    // the partitions waiting for the key hold no lease and no attempt, and nothing was dead-lettered
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select p.name,"
        + " cu.committed_offset, cu.lease_id is null, cu.attempts from queen.cursors cu join queen.partitions p"
        + " on p.id = cu.partition_id join queen.queues q on q.id = p.queue_id where q.name = ?"
        + " and p.name in ('mixed', 'other') order by p.name")) {
      st.setString(1, q);
      try (ResultSet rs = st.executeQuery()) {
        List<String> rows = new ArrayList<>();
        while (rs.next()) {
          rows.add(rs.getString(1) + " " + rs.getLong(2) + " " + rs.getBoolean(3) + " " + rs.getInt(4));
        }
        assertThat(rows).containsExactly("mixed 1 true 0", "other -1 true 0");
      }
    }
    assertThat(a.deadLetters(q).defaultGroup().list(10, null)).isEmpty();

    // the status names them: 2 in 'mixed' (the message sealed under C and the one behind it), 3 in 'other'
    assertThat(a.status().queue(q).waitingForKey()).isEqualTo(Map.of(ID_C, 5L));
    assertThat(a.status().queue(q).messagesWaitingForKey()).isEqualTo(5);
    assertThat(a.status().queue(q).group(Queen.DEFAULT_GROUP).lag()).isEqualTo(5);

    // the consume loop handles new messages of the healthy partitions although the others still wait
    Set<String> handled = ConcurrentHashMap.newKeySet();
    try (Subscription s = a.queue(q).consumer().batch(10).partitions(4).consume(m ->
        handled.add(m.payload().path("p").asText() + "/" + m.payload().path("i").asInt()))) {
      List<PushItem> more = new ArrayList<>();
      for (int p = 0; p < 6; p++) {
        more.add(PushItem.of("p" + p, Map.of("p", p, "i", 5)));
      }
      a.queue(q).push(more);
      await().atMost(Duration.ofSeconds(10)).until(() -> handled.size() == 6);
    }
    assertThat(handled).containsExactlyInAnyOrder("0/5", "1/5", "2/5", "3/5", "4/5", "5/5");

    // a node that holds the key takes them, in order
    Queen withKey = node("with-key", KEY_A, KEY_C);
    List<Message> rest = new ArrayList<>();
    for (int round = 0; round < 10 && rest.size() < 5; round++) {
      List<Message> batch = withKey.queue(q).consumer().batch(10).partitions(4).waitFor(Duration.ZERO).pop();
      rest.addAll(batch);
      if (!batch.isEmpty()) {
        withKey.ack(batch);
      }
    }
    assertThat(rest).extracting(m -> m.partition() + "/" + m.payload().path("i").asInt())
        .containsExactlyInAnyOrder("mixed/2", "mixed/3", "other/0", "other/1", "other/2");
    assertThat(a.status().queue(q).waitingForKey()).isEmpty();
  }

  @Test
  void aLongRunOfPartitionsWaitingForAKeyDelaysTheOthersByAPopNotForGood() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    // more partitions waiting for a key than a scan looks at (partitions + 64), all before the healthy ones
    Queen other = adopting("other", KEY_C, KEY_A);
    List<PushItem> waiting = new ArrayList<>();
    for (int p = 0; p < 100; p++) {
      waiting.add(PushItem.of(String.format("w%03d", p), Map.of("p", p)));
    }
    other.queue(q).push(waiting);
    List<PushItem> healthy = new ArrayList<>();
    for (int p = 0; p < 5; p++) {
      healthy.add(PushItem.of("h" + p, Map.of("p", p)));
    }
    a.queue(q).push(healthy);

    List<String> got = new ArrayList<>();
    for (int round = 0; round < 20 && got.size() < 5; round++) {
      List<Message> batch = a.queue(q).consumer().batch(10).partitions(1).waitFor(Duration.ZERO).pop();
      batch.forEach(m -> got.add(m.partition()));
      if (!batch.isEmpty()) {
        a.ack(batch);
      }
    }
    assertThat(got).containsExactlyInAnyOrder("h0", "h1", "h2", "h3", "h4");
    assertThat(a.status().queue(q).waitingForKey()).isEqualTo(Map.of(ID_C, 100L));
  }

  @Test
  void aQueueWhoseEncryptionWasSwitchedOffStillLeavesSealedMessagesForANodeWithTheKey() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    a.queue(q).push(List.of(PushItem.of("sealed", Map.of("n", 1))));
    a.queue(q).configure(c -> c.encryption(false));
    a.queue(q).push(List.of(PushItem.of("plain", Map.of("n", 2))));
    assertThat(stored()).containsExactly(null, ID_A);

    Queen none = node("none", null); // no key at all: it pops the plain queue, and leaves what it cannot open
    List<Message> got = none.queue(q).consumer().batch(10).partitions(10).pop();
    assertThat(got).extracting(m -> m.partition()).containsExactly("plain");
    none.ack(got);
    assertThat(none.status().queue(q).waitingForKey()).isEqualTo(Map.of(ID_A, 1L));
    Message sealed = a.queue(q).consumer().pop().get(0);
    assertThat(sealed.attempt()).isEqualTo(1);
    assertThat(sealed.payload().path("n").asInt()).isEqualTo(1);
  }

  @Test
  void aGaugeCountsTheMessagesWaitingForAKey() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    assertThat(a.queue(q).consumer().pop()).isEmpty(); // the default group exists: its cursors count
    a.queue(q).push(Map.of("n", 1));
    Queen other = adopting("other", KEY_C, KEY_A);
    other.queue(q).push(List.of(PushItem.of("other", Map.of("n", 2)), PushItem.of("other", Map.of("n", 3))));

    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Queen watched = node(builder("watched", KEY_A).meterRegistry(registry));
    // the gauges are read when the node starts and every ten seconds
    await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> assertThat(registry.find(
        "queen.messages.waiting_for_key").tag("queue", q).gauge()).isNotNull()
        .satisfies(g -> assertThat(g.value()).isEqualTo(2.0)));
    assertThat(watched.status().queue(q).waitingForKey()).isEqualTo(Map.of(ID_C, 2L));
    // the node holding the key sees none waiting
    assertThat(other.status().queue(q).waitingForKey()).isEmpty();
  }
}
