package io.queen.embedded.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.Kv;
import io.queen.KvEntry;
import io.queen.KvOptions;
import io.queen.KvPage;
import io.queen.embedded.internal.kv.KvImpl;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** getPrefix: required prefix, keyset paging, clamping, the byte ceiling, C collation. */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvPrefixTest {
  private static final KvOptions HOUR = Kv.ttl(Duration.ofHours(1));
  private static KvFixture fx;
  private static Kv kv;

  @BeforeAll
  static void migrate(DataSource ds) {
    fx = new KvFixture(ds);
    kv = fx.kv;
  }

  @Test
  void getPrefixRequiresPrefix() {
    assertThatThrownBy(() -> kv.getPrefix("p.required", null, null, 10)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("prefix");
    assertThatThrownBy(() -> kv.getPrefix("p.required", "", null, 10)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> kv.getPrefix("p.required", "x".repeat(513), null, 10))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void pageIsClampedAndTruncatedTellsTheTruth() throws Exception {
    String ns = "p.clamp";
    insert(ns, "item:", 1003);
    kv.put(ns, "other", 1, HOUR); // outside the prefix

    KvPage zero = kv.getPrefix(ns, "item:", null, 0);
    assertThat(zero.rows()).hasSize(1);
    assertThat(zero.truncated()).isTrue();
    assertThat(zero.next()).isEqualTo("item:0000");

    KvPage big = kv.getPrefix(ns, "item:", null, 50_000);
    assertThat(big.rows()).hasSize(Kv.MAX_PAGE);
    assertThat(big.truncated()).isTrue();

    KvPage rest = kv.getPrefix(ns, "item:", big.next(), 50_000);
    assertThat(rest.rows()).extracting(KvEntry::key).containsExactly("item:1000", "item:1001", "item:1002");
    assertThat(rest.truncated()).isFalse();
    assertThat(rest.next()).isNull();

    KvPage exact = kv.getPrefix(ns, "item:", "item:0999", 4);
    assertThat(exact.rows()).hasSize(3);
    assertThat(exact.truncated()).as("exactly the remaining keys: nothing follows").isFalse();
    KvPage exactFit = kv.getPrefix(ns, "item:", "item:0999", 3);
    assertThat(exactFit.rows()).hasSize(3);
    assertThat(exactFit.truncated()).as("a page that is exactly full but has nothing after it").isFalse();

    // paging by keyset visits every key once, in order
    List<String> seen = new ArrayList<>();
    String after = null;
    KvPage page;
    do {
      page = kv.getPrefix(ns, "item:", after, 97);
      page.rows().forEach(r -> seen.add(r.key()));
      after = page.next();
    } while (page.truncated());
    assertThat(seen).hasSize(1003).doesNotHaveDuplicates().isSorted();
  }

  @Test
  void afterIsAnExclusiveKeysetCursor() {
    String ns = "p.after";
    for (String k : List.of("a1", "a2", "a3")) {
      kv.put(ns, k, k, HOUR);
    }
    assertThat(kv.getPrefix(ns, "a", "a1", 10).rows()).extracting(KvEntry::key).containsExactly("a2", "a3");
    assertThat(kv.getPrefix(ns, "a", "a15", 10).rows()).as("after need not exist").extracting(KvEntry::key)
        .containsExactly("a2", "a3");
    assertThat(kv.getPrefix(ns, "a", "0", 10).rows()).as("after below the prefix").hasSize(3);
    assertThat(kv.getPrefix(ns, "a", "b", 10).rows()).as("after beyond the prefix").isEmpty();
  }

  @Test
  void byteCeilingCutsThePage(DataSource ds) {
    Kv small = new KvImpl(ds, new KvFixture(ds, 64 * 1024).store);
    String ns = "p.bytes";
    String value = "v".repeat(20_000);
    for (int i = 0; i < 10; i++) {
      small.put(ns, "blob:" + i, value, HOUR);
    }
    KvPage first = small.getPrefix(ns, "blob:", null, 1000);
    assertThat(first.rows()).as("3 × ~20 KB fit in 64 KiB, 4 do not").hasSize(3);
    assertThat(first.truncated()).isTrue();
    assertThat(first.next()).isEqualTo("blob:2");

    int total = first.rows().size();
    KvPage page = first;
    while (page.truncated()) {
      page = small.getPrefix(ns, "blob:", page.next(), 1000);
      total += page.rows().size();
    }
    assertThat(total).isEqualTo(10);

    small.put(ns, "whale:1", "w".repeat(65_000), HOUR);
    small.put(ns, "whale:2", "w".repeat(65_000), HOUR);
    KvPage whale = small.getPrefix(ns, "whale:", null, 1000);
    assertThat(whale.rows()).as("the first key always comes, so paging progresses").hasSize(1);
    assertThat(whale.truncated()).isTrue();
  }

  @Test
  void keysAreOrderedByCCollation() {
    String ns = "p.collation";
    List<String> keys = List.of("k:a", "k:B", "k:é", "k:z", "k:Z", "k:_", "k:ä", "k:e", "k:\uD83D\uDE00", "k:\uFFFD");
    for (String k : keys) {
      kv.put(ns, k, k, HOUR);
    }
    // byte order of UTF-8: upper case before '_' before lower case before any non-ASCII
    assertThat(kv.getPrefix(ns, "k:", null, 100).rows()).extracting(KvEntry::key)
        .containsExactly("k:B", "k:Z", "k:_", "k:a", "k:e", "k:z", "k:ä", "k:é", "k:\uFFFD", "k:\uD83D\uDE00");
  }

  @Test
  void prefixMatchesExactlyTheKeysThatStartWithIt() {
    String ns = "p.exact";
    List<String> keys = List.of("é", "é1", "éz", "ê", "e", "a%b", "a_b", "axb", "a\\b", "\uDBFF\uDFFFx",
        "\uDBFF\uDFFF", "\uD7FF1", "\uE000");
    for (String k : keys) {
      kv.put(ns, k, 1, HOUR);
    }
    assertThat(keysWith(ns, "é")).containsExactly("é", "é1", "éz");
    assertThat(keysWith(ns, "a%")).as("LIKE wildcards are plain characters").containsExactly("a%b");
    assertThat(keysWith(ns, "a_")).containsExactly("a_b");
    assertThat(keysWith(ns, "a\\")).containsExactly("a\\b");
    assertThat(keysWith(ns, "\uDBFF\uDFFF")).as("the last code point has no successor")
        .containsExactly("\uDBFF\uDFFF", "\uDBFF\uDFFFx");
    assertThat(keysWith(ns, "\uD7FF")).as("the successor skips the surrogates").containsExactly("\uD7FF1");
  }

  private static List<String> keysWith(String ns, String prefix) {
    return kv.getPrefix(ns, prefix, null, 1000).rows().stream().map(KvEntry::key).toList();
  }

  private static void insert(String ns, String prefix, int n) throws Exception {
    try (Connection c = fx.ds.getConnection();
        PreparedStatement st = c.prepareStatement("insert into queen.kv(namespace, key, value, version, expires_at)"
            + " select ?, ? || lpad(g::text, 4, '0'), to_jsonb(g), 1, null from generate_series(0, ? - 1) g")) {
      st.setString(1, ns);
      st.setString(2, prefix);
      st.setInt(3, n);
      st.executeUpdate();
    }
  }
}
