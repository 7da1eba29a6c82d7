package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.EncryptionException;
import io.queen.Message;
import io.queen.Queen;
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
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 42, "Keys that cannot split a cluster": a node whose key is not one of the cluster's is refused at start with
 * the key ids named and stores nothing; the first key and the next one of a rotation are adopted explicitly.
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClusterKeysTest {
  private static final String KEY_A = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  private static final String KEY_B = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
  private static final String ID_A = PayloadCipher.keyId(HexFormat.of().parseHex(KEY_A));
  private static final String ID_B = PayloadCipher.keyId(HexFormat.of().parseHex(KEY_B));
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
        .janitor(false).runConnectors(false);
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
}
