package io.queen.embedded.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.queen.AckStatus;
import io.queen.Message;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.testkit.QueenPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The dashboard in a real browser: headless Chromium driven through the DevTools protocol ({@link Cdp}). The page
 * loads with no console error, shows a queue's lag after pushes, redrives a dead letter through its button, and
 * hides every action on a read-only node. Skipped, with the reason printed, where no Chromium is installed
 * ({@code apt-get install chromium}; {@code .ci/run} installs it). The screenshot of the main view is written to
 * {@code target/dashboard.png} ({@code docs/dashboard.png}, shown in the README and docs/http.md, is a copy).
 */
@QueenPostgres
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DashboardBrowserTest {
  Path chromium;
  Queen queen;

  @BeforeEach
  void findBrowser() {
    chromium = Cdp.findChromium();
    if (chromium == null) {
      String why = "DashboardBrowserTest skipped: no Chromium on this machine (apt-get install chromium)";
      System.out.println(why);
      Assumptions.abort(why);
    }
  }

  @AfterEach
  void stop() {
    if (queen != null) {
      queen.close();
    }
  }

  @Test
  void thePageShowsLagAndRedrivesADeadLetter(DataSource ds) throws Exception {
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("dash-1").http(HttpOptions.port(0)).start();
    for (int i = 0; i < 5; i++) {
      queen.queue("orders").partition("customer-" + (i % 2)).push(Map.of("order", i));
    }
    queen.queue("payments").configure(c -> c.retryLimit(0));
    queen.queue("payments").partition("acct-9").push(Map.of("amount", 12));
    Message m = queen.queue("payments").consumer().pop().get(0);
    queen.ack(m, AckStatus.DEAD_LETTER, "card declined: insufficient funds");
    String url = "http://127.0.0.1:" + EmbeddedQueen.httpAddress(queen).orElseThrow().getPort() + "/";

    try (Cdp page = Cdp.launch(chromium)) {
      page.call("Emulation.setDeviceMetricsOverride", Cdp.params().put("width", 1360).put("height", 860)
          .put("deviceScaleFactor", 1).put("mobile", false));
      page.navigate(url);
      await().atMost(Duration.ofSeconds(20)).until(() -> page.eval("document.body.dataset.loaded === 'true'")
          .asBoolean());
      // the queue's lag: five messages for its default group once it has read (the group exists after a pop)
      queen.queue("orders").consumer().pop();
      await().atMost(Duration.ofSeconds(20)).until(() -> page.eval(
          "(document.querySelector('tr[data-queue=\"orders\"] td.lag') || {}).textContent").asText().equals("5"));
      assertThat(page.eval("document.querySelector('tr[data-queue=\"payments\"] td.dead').textContent").asText())
          .isEqualTo("1");

      page.eval("document.querySelector('tr[data-queue=\"payments\"]').click()");
      await().atMost(Duration.ofSeconds(20)).until(() -> page.eval(
          "document.querySelectorAll('#dl-table tr[data-dead-letter]').length").asInt() == 1);
      assertThat(page.eval("document.querySelector('#dl-table tr[data-dead-letter] .error-text').textContent")
          .asText()).isEqualTo("card declined: insufficient funds");
      // traffic for the throughput sparklines: pushes at a changing rate, one round per refresh of the page (each
      // refresh adds a point), and a reader behind
      for (int round = 0; round < 4; round++) {
        if (round == 1) {
          queen.queue("events").group("audit").subscription(io.queen.SubscriptionMode.ALL).batch(3).pop();
        }
        for (int i = 0; i < 5 + round * 12; i++) {
          queen.queue("events").partition("tenant-" + (i % 4)).push(Map.of("round", round, "i", i));
        }
        queen.queue("orders").partition("customer-" + (round % 3)).push(Map.of("order", 100 + round));
        String shown = page.eval("document.getElementById('updated').textContent").asText();
        await().atMost(Duration.ofSeconds(20)).until(() -> !page.eval(
            "document.getElementById('updated').textContent").asText().equals(shown));
      }
      byte[] png = page.screenshot();
      Files.createDirectories(Path.of("target"));
      Files.write(Path.of("target", "dashboard.png"), png);

      page.eval("document.querySelector('#dl-table tr[data-dead-letter] button.redrive').click()");
      await().atMost(Duration.ofSeconds(20)).until(() -> queen.deadLetters("payments").defaultGroup().count() == 0);
      assertThat(page.eval("(document.querySelector('tr[data-queue=\"events\"] svg.spark polyline') || {})"
          + ".getAttribute('points').split(' ').length").asInt()).isGreaterThanOrEqualTo(2);
      List<Message> again = queen.queue("payments").consumer().pop();
      assertThat(again).extracting(x -> x.payload().get("amount").asInt()).containsExactly(12);
      await().atMost(Duration.ofSeconds(20)).until(() -> page.eval(
          "document.querySelectorAll('#dl-table tr[data-dead-letter]').length").asInt() == 0);
      assertThat(page.errors()).isEmpty();
    }
  }

  @Test
  void aReadOnlyNodeHidesEveryAction(DataSource ds) throws Exception {
    queen = EmbeddedQueen.builder().dataSource(ds).nodeId("dash-ro").http(HttpOptions.port(0).readOnly(true)).start();
    queen.queue("ro").configure(c -> c.retryLimit(0));
    queen.queue("ro").partition("p").push(Map.of("n", 1));
    queen.ack(queen.queue("ro").consumer().pop().get(0), AckStatus.DEAD_LETTER, "bad");
    String url = "http://127.0.0.1:" + EmbeddedQueen.httpAddress(queen).orElseThrow().getPort() + "/";
    try (Cdp page = Cdp.launch(chromium)) {
      page.navigate(url);
      await().atMost(Duration.ofSeconds(20)).until(() -> page.eval("document.body.dataset.loaded === 'true'")
          .asBoolean());
      page.eval("document.querySelector('tr[data-queue=\"ro\"]').click()");
      await().atMost(Duration.ofSeconds(20)).until(() -> page.eval(
          "document.querySelectorAll('#dl-table tr[data-dead-letter]').length").asInt() == 1);
      assertThat(page.eval("document.getElementById('mode').hidden").asBoolean()).isFalse();
      assertThat(page.eval("[...document.querySelectorAll('button.act')].every(b => b.offsetParent === null)")
          .asBoolean()).isTrue();
      assertThat(page.errors()).isEmpty();
    }
  }
}
