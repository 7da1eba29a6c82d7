package io.queen.embedded.internal.http;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.queen.BrokerClosedException;
import io.queen.InvalidConnectorException;
import io.queen.PayloadSerializationException;
import io.queen.Queen;
import io.queen.QueenDatabaseException;
import io.queen.QueueFullException;
import io.queen.embedded.http.HttpOptions;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's HTTP server (the JDK's {@code com.sun.net.httpserver}: no dependency, and enough for an operator's
 * surface on loopback). It owns the listener, authentication, the body bound each {@link Request} reads within, and
 * the mapping of failures to JSON errors; {@link Routes} holds the routes, which use the public {@link Queen} API
 * only.
 *
 * <p>Threads: the JDK's dispatcher thread (started from a node daemon thread, so it is a daemon too) and a fixed pool
 * of {@code queen-<node>-http-<n>} daemon threads that run the requests. {@link #close()} stops accepting, lets
 * requests in flight finish for up to a second, and stops the pool.
 */
public final class HttpSurface implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(HttpSurface.class);
  private static final String NODELAY = "sun.net.httpserver.nodelay";

  private final HttpOptions options;
  private final String node;
  private final HttpServer server;
  private final ExecutorService pool;
  private final Routes routes;
  private final byte[] expectedAuth;
  private final AtomicBoolean closed = new AtomicBoolean();

  private HttpSurface(HttpOptions options, String node, HttpServer server, ExecutorService pool, Routes routes) {
    this.options = options;
    this.node = node;
    this.server = server;
    this.pool = pool;
    this.routes = routes;
    String expected = options.token() != null ? "Bearer " + options.token()
        : options.user() != null ? "Basic " + Base64.getEncoder().encodeToString((options.user() + ":"
        + options.password()).getBytes(StandardCharsets.UTF_8)) : null;
    this.expectedAuth = expected == null ? null : expected.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * Binds and starts the server. {@code threads} makes the node's daemon threads; {@code databaseReady} answers
   * whether the database takes a statement now (the readiness check). A port in use is an
   * {@link IllegalStateException} naming it.
   */
  public static HttpSurface start(HttpOptions options, Queen queen, ThreadFactory threads, BooleanSupplier databaseReady,
      Object meterRegistry) {
    InetSocketAddress address;
    try {
      address = new InetSocketAddress(InetAddress.getByName(options.bindAddress()), options.port());
    } catch (IOException e) {
      throw new IllegalStateException("http: bind address '" + options.bindAddress() + "' does not resolve", e);
    }
    // The JDK's server writes a response's headers and body in two writes; with Nagle's algorithm on, the body waits
    // for the client's delayed ACK of the headers (40 ms on Linux), which made every call take ~40 ms on loopback.
    // Its switch is this property, read once when the JDK's server first starts in the JVM; an application that set
    // it keeps its own value.
    if (System.getProperty(NODELAY) == null) {
      System.setProperty(NODELAY, "true");
    }
    HttpServer server;
    try {
      server = HttpServer.create(address, 64);
    } catch (IOException e) {
      throw new IllegalStateException("http: cannot listen on " + options.bindAddress() + ":" + options.port() + " ("
          + e.getMessage() + "); choose another port, or 0 for a free one", e);
    }
    ExecutorService pool = Executors.newFixedThreadPool(options.threads(), threads);
    HttpSurface surface = new HttpSurface(options, queen.nodeId(), server, pool,
        new Routes(queen, options.isReadOnly(), databaseReady, meterRegistry));
    server.setExecutor(pool);
    server.createContext("/", surface::handle);
    // the JDK's dispatcher thread inherits the daemon flag of the thread that starts the server: start it from one of
    // the node's daemon threads, so an application that forgets close() can still exit
    Thread starter = threads.newThread(server::start);
    starter.start();
    try {
      starter.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      surface.close();
      throw new IllegalStateException("http: interrupted while starting", e);
    }
    LOG.info("{} - HTTP surface and dashboard on http://{}:{}/ ({})", queen.nodeId(),
        server.getAddress().getAddress().getHostAddress(), server.getAddress().getPort(), options);
    return surface;
  }

  /** The address the server listens on (its real port when the options asked for 0). */
  public InetSocketAddress address() {
    return server.getAddress();
  }

  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    server.stop(1);
    pool.shutdown();
    try {
      if (!pool.awaitTermination(2, TimeUnit.SECONDS)) {
        pool.shutdownNow();
      }
    } catch (InterruptedException e) {
      pool.shutdownNow();
      Thread.currentThread().interrupt();
    }
    LOG.info("{} - HTTP surface closed", node);
  }

  // ------------------------------------------------------------------------------------- one exchange

  private void handle(HttpExchange ex) throws IOException {
    Reply reply;
    try {
      reply = dispatch(ex);
    } catch (HttpError e) {
      reply = Reply.error(e.status, e.code, e.getMessage(), e.field);
    } catch (RuntimeException e) {
      reply = mapFailure(e);
    }
    send(ex, reply);
  }

  private Reply dispatch(HttpExchange ex) throws IOException {
    String path = ex.getRequestURI().getRawPath();
    String method = ex.getRequestMethod();
    boolean health = path.equals("/health") || path.startsWith("/health/");
    if (!health && expectedAuth != null && !authorized(ex)) {
      if (method.equals("GET") && DashboardRoutes.isDashboard(path) && options.token() != null) {
        // a browser cannot send a bearer token with a page load: the page asks for it once; the sign-in page's own
        // style and script (no data in them) are all that is served without it
        return path.equals("/dashboard/login.js") || path.equals("/dashboard/app.css") ? routes.route(new Request(
            method, path, Map.of(), ex, 0)) : DashboardRoutes.loginPage();
      }
      if (options.user() != null) {
        ex.getResponseHeaders().set("WWW-Authenticate", "Basic realm=\"queen\", charset=\"UTF-8\"");
      } else {
        ex.getResponseHeaders().set("WWW-Authenticate", "Bearer realm=\"queen\"");
      }
      throw new HttpError(401, "unauthorized", "this route needs the node's credential"
          + (options.token() != null ? " (Authorization: Bearer <token>)" : " (basic auth)"));
    }
    Request req = new Request(method, path, query(ex.getRequestURI().getRawQuery()), ex, options.maxBodyBytes());
    return routes.route(req);
  }

  private boolean authorized(HttpExchange ex) {
    String given = ex.getRequestHeaders().getFirst("Authorization");
    if (given == null && options.token() != null) {
      given = cookieToken(ex.getRequestHeaders().get("Cookie"));
    }
    return given != null && MessageDigest.isEqual(given.getBytes(StandardCharsets.UTF_8), expectedAuth);
  }

  /** The dashboard's login form keeps the token in the {@code queen_token} cookie (SameSite=Strict). */
  private static String cookieToken(List<String> cookies) {
    if (cookies == null) {
      return null;
    }
    for (String header : cookies) {
      for (String c : header.split(";")) {
        String t = c.trim();
        if (t.startsWith("queen_token=")) {
          return "Bearer " + URLDecoder.decode(t.substring("queen_token=".length()), StandardCharsets.UTF_8);
        }
      }
    }
    return null;
  }

  private Reply mapFailure(RuntimeException e) {
    if (e instanceof InvalidConnectorException ic) {
      return Reply.error(400, "invalid_connector", ic.getMessage(), ic.field());
    }
    if (e instanceof io.queen.ConnectorException ce) {
      // cannot be done on this node (no encryption key, a wrong one): the connector's own code and its fix
      return Reply.error(409, ce.code(), ce.getMessage(), null);
    }
    if (e instanceof PayloadSerializationException) {
      return Reply.error(400, "invalid_payload", e.getMessage(), null);
    }
    if (e instanceof QueueFullException) {
      return Reply.error(409, "queue_full", e.getMessage(), null);
    }
    if (e instanceof IllegalArgumentException) {
      return Reply.error(400, "invalid_request", String.valueOf(e.getMessage()), null);
    }
    if (e instanceof UnsupportedOperationException) {
      return Reply.error(501, "connectors_unavailable", e.getMessage(), null);
    }
    if (e instanceof BrokerClosedException) {
      return Reply.error(503, "closed", "the node is closing", null);
    }
    if (e instanceof QueenDatabaseException) {
      // the exception's text may name a statement: the log has it, the answer does not
      LOG.warn("{} - HTTP request failed on the database: {}", node, e.toString());
      return Reply.error(503, "database_unavailable", "the database did not answer the request; try again", null);
    }
    if (e instanceof IllegalStateException) {
      return Reply.error(409, "conflict", e.getMessage(), null);
    }
    LOG.warn("{} - HTTP request failed", node, e);
    return Reply.error(500, "internal", "the node failed to answer (" + e.getClass().getSimpleName() + "); its log has"
        + " the details", null);
  }

  private static void send(HttpExchange ex, Reply reply) throws IOException {
    try (ex) {
      byte[] body = reply.body();
      ex.getResponseHeaders().set("Content-Type", reply.contentType());
      ex.getResponseHeaders().set("Cache-Control", "no-store");
      ex.getResponseHeaders().set("X-Content-Type-Options", "nosniff");
      if (reply.contentType().startsWith("text/html")) {
        ex.getResponseHeaders().set("Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'");
      }
      if (ex.getRequestMethod().equals("HEAD") || reply.status() == 204) {
        ex.sendResponseHeaders(reply.status(), -1);
        return;
      }
      ex.sendResponseHeaders(reply.status(), body.length == 0 ? -1 : body.length);
      if (body.length > 0) {
        try (OutputStream out = ex.getResponseBody()) {
          out.write(body);
        }
      }
    }
  }

  private static Map<String, String> query(String raw) {
    Map<String, String> out = new LinkedHashMap<>();
    if (raw == null || raw.isEmpty()) {
      return out;
    }
    for (String pair : raw.split("&")) {
      if (pair.isEmpty()) {
        continue;
      }
      int eq = pair.indexOf('=');
      String k = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
      String v = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
      if (out.put(k, v) != null) {
        throw new HttpError(400, "invalid_request", "query parameter '" + k + "' is given twice");
      }
    }
    return out;
  }
}
