package io.queen.embedded.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A headless Chromium driven through the DevTools protocol over the JDK's own WebSocket client: no Selenium, no
 * driver binary. One page; {@link #call} sends a command and waits for its answer; console errors, uncaught
 * exceptions and failed loads the page reports are collected in {@link #errors()}.
 */
final class Cdp implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern LISTENING = Pattern.compile("DevTools listening on (ws://\\S+)");

  private final Process process;
  private final Path profile;
  private final WebSocket socket;
  private final AtomicInteger ids = new AtomicInteger();
  private final Map<Integer, CompletableFuture<JsonNode>> pending = new ConcurrentHashMap<>();
  private final List<String> errors = new CopyOnWriteArrayList<>();

  /** The Chromium binary on this machine, or null. */
  static Path findChromium() {
    for (String c : List.of("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")) {
      if (Files.isExecutable(Path.of(c))) {
        return Path.of(c);
      }
    }
    return null;
  }

  private Cdp(Process process, Path profile, WebSocket socket) {
    this.process = process;
    this.profile = profile;
    this.socket = socket;
  }

  static Cdp launch(Path chromium) throws Exception {
    Path profile = Files.createTempDirectory("queen-chromium");
    Process p = new ProcessBuilder(chromium.toString(), "--headless=new", "--no-sandbox", "--disable-gpu",
        "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
        "--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir=" + profile, "about:blank")
        .redirectErrorStream(true).start();
    BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    String browserWs = null;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (browserWs == null && System.nanoTime() < deadline) {
      String line = out.readLine();
      if (line == null) {
        break;
      }
      Matcher m = LISTENING.matcher(line);
      if (m.find()) {
        browserWs = m.group(1);
      }
    }
    if (browserWs == null) {
      p.destroyForcibly();
      throw new IllegalStateException("Chromium did not print its DevTools address");
    }
    Thread drain = new Thread(() -> {
      try {
        while (out.readLine() != null) {
          // Chromium's own log: read so that it never blocks on a full pipe
        }
      } catch (IOException e) {
        // the process ended
      }
    }, "chromium-output");
    drain.setDaemon(true);
    drain.start();
    URI browser = URI.create(browserWs);
    HttpClient http = HttpClient.newHttpClient();
    String list = http.send(HttpRequest.newBuilder(URI.create("http://" + browser.getHost() + ":" + browser.getPort()
        + "/json/list")).build(), HttpResponse.BodyHandlers.ofString()).body();
    String pageWs = null;
    for (JsonNode t : JSON.readTree(list)) {
      if (t.path("type").asText().equals("page")) {
        pageWs = t.get("webSocketDebuggerUrl").asText();
        break;
      }
    }
    if (pageWs == null) {
      p.destroyForcibly();
      throw new IllegalStateException("Chromium has no page target: " + list);
    }
    Cdp[] self = new Cdp[1];
    Listener listener = new Listener(self);
    WebSocket ws = http.newWebSocketBuilder().buildAsync(URI.create(pageWs), listener).get(10, TimeUnit.SECONDS);
    self[0] = new Cdp(p, profile, ws);
    self[0].call("Runtime.enable", null);
    self[0].call("Log.enable", null);
    self[0].call("Page.enable", null);
    return self[0];
  }

  /** What the page reported as errors: console.error, uncaught exceptions, resources that failed to load. */
  List<String> errors() {
    return List.copyOf(errors);
  }

  JsonNode call(String method, ObjectNode params) throws Exception {
    int id = ids.incrementAndGet();
    ObjectNode msg = JSON.createObjectNode().put("id", id).put("method", method);
    if (params != null) {
      msg.set("params", params);
    }
    CompletableFuture<JsonNode> answer = new CompletableFuture<>();
    pending.put(id, answer);
    socket.sendText(JSON.writeValueAsString(msg), true).get(10, TimeUnit.SECONDS);
    JsonNode r = answer.get(30, TimeUnit.SECONDS);
    if (r.has("error")) {
      throw new IllegalStateException(method + " failed: " + r.get("error"));
    }
    return r.get("result");
  }

  static ObjectNode params() {
    return JSON.createObjectNode();
  }

  /** Evaluates {@code expression} in the page (promises awaited) and returns its value as JSON. */
  JsonNode eval(String expression) throws Exception {
    JsonNode r = call("Runtime.evaluate", params().put("expression", expression).put("returnByValue", true)
        .put("awaitPromise", true));
    if (r.has("exceptionDetails")) {
      throw new IllegalStateException("page threw: " + r.get("exceptionDetails"));
    }
    return r.path("result").path("value");
  }

  void navigate(String url) throws Exception {
    call("Page.navigate", params().put("url", url));
  }

  byte[] screenshot() throws Exception {
    return java.util.Base64.getDecoder().decode(call("Page.captureScreenshot", params().put("format", "png"))
        .get("data").asText());
  }

  private void onMessage(String text) {
    JsonNode m;
    try {
      m = JSON.readTree(text);
    } catch (IOException e) {
      return;
    }
    if (m.has("id")) {
      CompletableFuture<JsonNode> f = pending.remove(m.get("id").asInt());
      if (f != null) {
        f.complete(m);
      }
      return;
    }
    String method = m.path("method").asText();
    JsonNode p = m.path("params");
    switch (method) {
      case "Runtime.exceptionThrown" -> errors.add("exception: " + p.path("exceptionDetails"));
      case "Runtime.consoleAPICalled" -> {
        if (p.path("type").asText().equals("error")) {
          errors.add("console.error: " + p.path("args"));
        }
      }
      case "Log.entryAdded" -> {
        if (p.path("entry").path("level").asText().equals("error")) {
          errors.add("log: " + p.path("entry").path("text").asText() + " " + p.path("entry").path("url").asText());
        }
      }
      default -> { }
    }
  }

  @Override
  public void close() throws IOException {
    try {
      socket.sendClose(WebSocket.NORMAL_CLOSURE, "").get(2, TimeUnit.SECONDS);
    } catch (Exception e) {
      // closing anyway
    }
    process.destroy();
    try {
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> files = Files.walk(profile)) {
      files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    }
  }

  /** Joins a message's fragments and hands whole messages to the driver. */
  private static final class Listener implements WebSocket.Listener {
    private final Cdp[] self;
    private final StringBuilder text = new StringBuilder();

    Listener(Cdp[] self) {
      this.self = self;
    }

    @Override
    public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
      text.append(data);
      if (last) {
        String whole = text.toString();
        text.setLength(0);
        if (self[0] != null) { // set before the first command is sent
          self[0].onMessage(whole);
        }
      }
      ws.request(1);
      return null;
    }
  }
}
