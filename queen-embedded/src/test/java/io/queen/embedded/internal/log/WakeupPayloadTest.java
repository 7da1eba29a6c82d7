package io.queen.embedded.internal.log;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A notification names the partitions that got messages after the node id; names may hold any character, so each is
 * written with its length. Pure string work: no database.
 */
class WakeupPayloadTest {

  @Test
  void namesWithBarsColonsAndDigitsComeBackAsTheyWere() {
    List<String> names = List.of("a", "x|y", "12:34", "ü-ß", "|", ":", "9", "emoji-\uD83D\uDE00");
    String payload = Wakeups.payload("jobs", "node-1", names);
    assertThat(payload).startsWith("jobs|node-1|");
    int end = payload.indexOf('|', "jobs|".length());
    assertThat(Wakeups.names(payload, end + 1)).containsExactlyElementsOf(names);
  }

  @Test
  void withoutNamesThePayloadIsTheOneEarlierVersionsSend() {
    assertThat(Wakeups.payload("jobs", "node-1", null)).isEqualTo("jobs|node-1");
    assertThat(Wakeups.payload("jobs", "node-1", List.of())).isEqualTo("jobs|node-1");
  }

  @Test
  void tooManyNamesForOnePayloadNameNone() {
    List<String> names = new ArrayList<>();
    for (int i = 0; i < 500; i++) {
      names.add("partition-" + i);
    }
    String payload = Wakeups.payload("jobs", "node-1", names);
    assertThat(payload).isEqualTo("jobs|node-1"); // the receivers scan
    assertThat(payload.length()).isLessThan(8000);
    String longest = Wakeups.payload("q", "n", Collections.nCopies(15, "x".repeat(128)));
    assertThat(longest.length()).isLessThanOrEqualTo("q|n".length() + 1 + Wakeups.MAX_NAMED_CHARS);
  }

  @Test
  void aNotificationWakesTheQueuesListenersWithItsNamesAndANodeIgnoresItsOwn() {
    Wakeups w = new Wakeups(null, "queen", "me", (role, r) -> new Thread(r));
    List<List<String>> heard = new ArrayList<>();
    w.addListener("jobs", parts -> heard.add(parts == null ? null : new ArrayList<>(parts)));
    w.onNotification(Wakeups.payload("jobs", "other", List.of("a", "b|c")));
    w.onNotification("jobs|other"); // a node of an earlier version: names nothing
    w.onNotification("jobs"); // a push inside an application's transaction
    w.onNotification(Wakeups.payload("jobs", "me", List.of("a"))); // this node's own: its waiters were woken already
    w.onNotification(Wakeups.payload("other-queue", "other", List.of("a")));
    assertThat(heard).containsExactly(List.of("a", "b|c"), null, null);
    assertThat(w.ownNotificationsIgnored()).isEqualTo(1);
  }

  @Test
  void aListThisVersionDidNotWriteMeansScan() {
    assertThat(Wakeups.names("jobs|n|3:ab", "jobs|n|".length())).isNull();
    assertThat(Wakeups.names("jobs|n|x:ab", "jobs|n|".length())).isNull();
    assertThat(Wakeups.names("jobs|n|", "jobs|n|".length())).isNull();
  }
}
