package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.AckStatus;
import io.queen.DeadLetter;
import io.queen.EncryptionException;
import io.queen.Message;
import io.queen.Queen;
import io.queen.QueenType;
import io.queen.embedded.internal.log.PayloadCipher;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
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
 * Queue option {@code encryption}: payloads stored AES-256-GCM under the node's key with the
 * key's id per message, opened on delivery and in the dead-letter list; a node without the key refuses with an error
 * that names the queue and the fix, never a payload; a node lacking the key of a stored message leases nothing it
 * cannot open; old keys stay readable after a rotation (ClusterKeysTest covers the cluster's keys).
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EncryptionTest {
  private static final String KEY_A = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  private static final String KEY_B = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
  private static final String ID_A = PayloadCipher.keyId(HexFormat.of().parseHex(KEY_A));
  private static final String ID_B = PayloadCipher.keyId(HexFormat.of().parseHex(KEY_B));
  private static final String SECRET = "4111-1111-1111-1111";

  @QueenType(name = "card", version = 1)
  record Card(String holder, String number) {}

  private DataSource ds;
  private String q;
  private final List<Queen> nodes = new ArrayList<>();

  @BeforeEach
  void start(DataSource ds, TestInfo info) throws Exception {
    this.ds = ds;
    q = "enc-" + info.getTestMethod().orElseThrow().getName();
    // every test starts from a cluster that has adopted no key (the tests of this class share a database)
    try (Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement()) {
      st.execute("do $$ begin if to_regclass('queen.encryption_keys') is not null then"
          + " delete from queen.encryption_keys; end if; end $$");
    }
  }

  @AfterEach
  void stop() {
    nodes.forEach(Queen::close);
  }

  private Queen node(String id, String key, String... oldKeys) {
    return node(false, id, key, oldKeys);
  }

  /** A node that adopts its key for the cluster (ClusterKeysTest covers the adoption rules). */
  private Queen adopting(String id, String key, String... oldKeys) {
    return node(true, id, key, oldKeys);
  }

  private Queen node(boolean adopt, String id, String key, String... oldKeys) {
    EmbeddedQueen.Builder b = EmbeddedQueen.builder().dataSource(ds).nodeId(id).encryptionKey(key).listen(false)
        .janitor(false);
    if (oldKeys.length > 0) {
      b.oldEncryptionKeys(oldKeys);
    }
    if (adopt) {
      b.adoptEncryptionKey();
    }
    Queen n = b.start();
    nodes.add(n);
    return n;
  }

  /** Per stored message in offset order: key id, payload as stored, jsonb type of the payload. */
  private List<List<String>> rows() throws Exception {
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("select m.key_id, m.payload::text,"
        + " jsonb_typeof(m.payload), m.payload_type from queen.messages m join queen.partitions p on p.id = m.partition_id"
        + " join queen.queues q on q.id = p.queue_id where q.name = ? order by m.\"offset\"")) {
      st.setString(1, q);
      List<List<String>> out = new ArrayList<>();
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          out.add(java.util.Arrays.asList(rs.getString(1), rs.getString(2), rs.getString(3), rs.getString(4)));
        }
      }
      return out;
    }
  }

  @Test
  void roundTripStoresCiphertextAndTheKeyId() throws Exception {
    Queen a = adopting("a", KEY_A);
    assertThat(a.queue(q).configure(c -> c.encryption(true)).encryption()).isTrue();
    assertThat(a.queue(q).config().encryption()).isTrue();
    a.queue(q).push(Map.of("card", SECRET, "amount", 12.50));
    a.queue(q).push(new Card("Ada", SECRET));

    List<List<String>> rows = rows();
    assertThat(rows).hasSize(2);
    for (List<String> r : rows) {
      assertThat(r.get(0)).isEqualTo(ID_A).hasSize(16);
      assertThat(r.get(1)).doesNotContain(SECRET).doesNotContain("card").doesNotContain("holder");
      assertThat(r.get(2)).isEqualTo("string");
    }
    assertThat(rows.get(1).get(3)).isEqualTo("card"); // the type name stays readable; the payload does not

    List<Message> got = a.queue(q).consumer().batch(2).pop();
    assertThat(got).hasSize(2);
    assertThat(got.get(0).payload().path("card").asText()).isEqualTo(SECRET);
    assertThat(got.get(0).payload().path("amount").decimalValue()).isEqualByComparingTo("12.50");
    assertThat(got.get(1).payload(Card.class)).isEqualTo(new Card("Ada", SECRET));
  }

  @Test
  void aNodeWithoutTheKeyRefusesToPushAndToPop() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    a.queue(q).push(Map.of("card", SECRET));
    Queen none = node("none", null);

    assertThatThrownBy(() -> none.queue(q).push(Map.of("card", SECRET)))
        .isInstanceOfSatisfying(EncryptionException.class, e -> assertThat(e.queue()).isEqualTo(q))
        .hasMessageContaining("queue '" + q + "' has encryption on and this node has no encryption key")
        .hasMessageContaining("encryptionKey(...)").hasMessageContaining("QUEEN_ENCRYPTION_KEY")
        .hasMessageContaining("nothing was pushed").hasMessageNotContaining(SECRET);
    assertThatThrownBy(() -> none.queue(q).consumer().pop())
        .isInstanceOf(EncryptionException.class).hasMessageContaining("does not pop from it")
        .hasMessageNotContaining(SECRET);
    assertThatThrownBy(() -> none.transaction().push(q, "Default", Map.of("card", SECRET)).commit())
        .isInstanceOf(EncryptionException.class);
    assertThat(rows()).hasSize(1);

    // the message was not touched: the node with the key gets it at its first attempt
    Message m = a.queue(q).consumer().pop().get(0);
    assertThat(m.attempt()).isEqualTo(1);
    assertThat(m.payload().path("card").asText()).isEqualTo(SECRET);
  }

  @Test
  void aNodeWithAnotherKeyLeasesNothingItCannotOpen() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    a.queue(q).push(Map.of("card", SECRET));
    // a node of the cluster that lacks the key of a stored message (B adopted, A not kept as an older key)
    adopting("b", KEY_B, KEY_A).close();
    Queen onlyB = node("only-b", KEY_B);

    assertThat(onlyB.queue(q).consumer().pop()).isEmpty();
    assertThat(onlyB.status().queue(q).waitingForKey()).isEqualTo(Map.of(ID_A, 1L));
    // not leased, no attempt
    Message m = a.queue(q).consumer().pop().get(0);
    assertThat(m.attempt()).isEqualTo(1);
    assertThat(m.payload().path("card").asText()).isEqualTo(SECRET);
  }

  @Test
  void rotationKeepsOldMessagesReadableAndSealsNewOnesUnderTheNewKey() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true).leaseTime(Duration.ofMinutes(5)));
    a.queue(q).push(Map.of("n", 1));
    a.close();
    nodes.remove(a);

    Queen rotated = adopting("rotated", KEY_B, KEY_A);
    rotated.queue(q).push(Map.of("n", 2));
    assertThat(rows()).extracting(r -> r.get(0)).containsExactly(ID_A, ID_B);
    List<Message> got = rotated.queue(q).consumer().batch(2).pop();
    assertThat(got).extracting(m -> m.payload().path("n").asInt()).containsExactly(1, 2);
    rotated.ack(got);

    // a node given only the new key leaves what the old one sealed for the nodes that hold it, and says so
    rotated.queue(q).group("audit").subscription(io.queen.SubscriptionMode.ALL).pop(); // subscribe from the start
    Queen onlyNew = node("only-new", KEY_B);
    assertThat(onlyNew.queue(q).group("late").subscription(io.queen.SubscriptionMode.ALL).pop()).isEmpty();
    assertThat(onlyNew.status().queue(q).waitingForKey()).isEqualTo(Map.of(ID_A, 2L));
  }

  @Test
  void deadLettersAreOpenedTooAndListedWithoutTheKeyAsAnError() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    a.queue(q).push(Map.of("card", SECRET));
    Message m = a.queue(q).consumer().pop().get(0);
    a.ack(m, AckStatus.DEAD_LETTER, "declined");

    List<DeadLetter> dl = a.deadLetters(q).defaultGroup().list(10, null);
    assertThat(dl).hasSize(1);
    assertThat(dl.get(0).payload().path("card").asText()).isEqualTo(SECRET);
    assertThat(dl.get(0).payloadError()).isNull();

    Queen none = node("none", null);
    List<DeadLetter> blind = none.deadLetters(q).defaultGroup().list(10, null);
    assertThat(blind).hasSize(1);
    assertThat(blind.get(0).payload()).isNull();
    assertThat(blind.get(0).payloadError()).contains("sealed under key id " + ID_A).doesNotContain(SECRET);
  }

  @Test
  void aNodeWhoseViewIsStaleSealsAfterTheRefusal() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).push(Map.of("n", 1));                        // plain queue; node a remembers that for 5 s
    Queen admin = node("admin", KEY_A);
    admin.queue(q).configure(c -> c.encryption(true));
    a.queue(q).push(Map.of("n", 2));                        // push_fast refuses the plain payload; a seals and pushes again
    a.queue(q).push(List.of(io.queen.PushItem.of(Map.of("n", 3)).transactionId("t-3")));
    assertThat(rows()).extracting(r -> r.get(0)).containsExactly(null, ID_A, ID_A);
    // switching it on changed nothing stored: the plain message is delivered as it is
    List<Message> got = a.queue(q).consumer().batch(3).pop();
    assertThat(got).extracting(x -> x.payload().path("n").asInt()).containsExactly(1, 2, 3);
  }

  @Test
  void aChangedCiphertextIsDeadLetteredNotDelivered() throws Exception {
    Queen a = adopting("a", KEY_A);
    a.queue(q).configure(c -> c.encryption(true));
    a.queue(q).push(Map.of("n", 1));
    a.queue(q).push(Map.of("n", 2));
    // move message 1's ciphertext onto message 0: the tag binds it to its message id
    try (Connection c = ds.getConnection(); PreparedStatement st = c.prepareStatement("update queen.messages m set"
        + " payload = (select payload from queen.messages x where x.partition_id = m.partition_id and x.\"offset\" = 1)"
        + " from queen.partitions p join queen.queues q on q.id = p.queue_id where p.id = m.partition_id and q.name = ?"
        + " and m.\"offset\" = 0")) {
      st.setString(1, q);
      assertThat(st.executeUpdate()).isEqualTo(1);
    }
    List<Message> got = a.queue(q).consumer().batch(2).pop();
    assertThat(got).extracting(x -> x.payload().path("n").asInt()).containsExactly(2);
    List<DeadLetter> dl = a.deadLetters(q).defaultGroup().list(10, null);
    assertThat(dl).hasSize(1);
    assertThat(dl.get(0).error()).contains("fails its integrity check");
  }

  @Test
  void builderChecksTheOldKeys() {
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).encryptionKey(KEY_A).oldEncryptionKeys("abc").start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("oldEncryptionKeys[0] must be 64 hex digits")
        .hasMessageNotContaining("abc");
    assertThatThrownBy(() -> EmbeddedQueen.builder().dataSource(ds).encryptionKey(null).oldEncryptionKeys(KEY_A).start())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("oldEncryptionKeys needs an encryptionKey");
  }
}
