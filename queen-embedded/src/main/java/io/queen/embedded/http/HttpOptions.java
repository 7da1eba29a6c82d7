package io.queen.embedded.http;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The HTTP surface and dashboard a node serves when the application asks: {@code EmbeddedQueen.builder().http(
 * HttpOptions.port(6632).token(secret))}. Off unless given. Immutable: every method returns a new value; the
 * builder validates it in {@code build()} ({@link #problems()}) before any thread starts.
 *
 * <p>Safe by default: it binds the loopback address; a credential (a bearer token or a basic-auth user and password)
 * is needed by every route but {@code /health} once one is set, and the builder refuses a bind address other than
 * loopback without one. Request bodies are bounded by {@link #maxBodyBytes()}. {@link #readOnly(boolean)} refuses
 * every route that changes something (and pop, which leases), and the dashboard hides its actions.
 *
 * <p>Thread-safe (immutable).
 */
public final class HttpOptions {
  /** The port the HTTP surface listens on unless told otherwise. */
  public static final int DEFAULT_PORT = 6632;
  public static final String DEFAULT_BIND = "127.0.0.1";
  public static final int DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
  public static final int MAX_BODY_BYTES_LIMIT = 64 * 1024 * 1024;
  public static final int DEFAULT_THREADS = 4;

  private final int port;
  private final String bind;
  private final String token;
  private final String user;
  private final String password;
  private final boolean readOnly;
  private final int maxBodyBytes;
  private final int threads;

  private HttpOptions(int port, String bind, String token, String user, String password, boolean readOnly,
      int maxBodyBytes, int threads) {
    this.port = port;
    this.bind = bind;
    this.token = token;
    this.user = user;
    this.password = password;
    this.readOnly = readOnly;
    this.maxBodyBytes = maxBodyBytes;
    this.threads = threads;
  }

  /** Loopback on {@code port} (0..65535; 0 takes a free port, see {@code EmbeddedQueen.httpAddress}). */
  public static HttpOptions port(int port) {
    return new HttpOptions(port, DEFAULT_BIND, null, null, null, false, DEFAULT_MAX_BODY_BYTES, DEFAULT_THREADS);
  }

  /** {@link #DEFAULT_PORT} on loopback. */
  public static HttpOptions defaults() {
    return port(DEFAULT_PORT);
  }

  /**
   * The address to bind: an IP literal or a host name ({@code 0.0.0.0} for every interface). Anything other than a
   * loopback address needs a credential.
   */
  public HttpOptions bindAddress(String address) {
    return new HttpOptions(port, Objects.requireNonNull(address, "bindAddress must not be null"), token, user,
        password, readOnly, maxBodyBytes, threads);
  }

  /** A bearer token ({@code Authorization: Bearer <token>}), 16..256 printable ASCII characters. */
  public HttpOptions token(String token) {
    return new HttpOptions(port, bind, Objects.requireNonNull(token, "token must not be null"), user, password,
        readOnly, maxBodyBytes, threads);
  }

  /** A basic-auth credential; the password 8..256 characters, the user 1..64 without {@code :}. */
  public HttpOptions basicAuth(String user, String password) {
    return new HttpOptions(port, bind, token, Objects.requireNonNull(user, "user must not be null"),
        Objects.requireNonNull(password, "password must not be null"), readOnly, maxBodyBytes, threads);
  }

  /** Read-only: only reads are served (status, lists, KV reads); every other route answers 403 {@code read_only}. */
  public HttpOptions readOnly(boolean readOnly) {
    return new HttpOptions(port, bind, token, user, password, readOnly, maxBodyBytes, threads);
  }

  /** The largest request body, 1 KiB .. 64 MiB (default 1 MiB); a bigger one is answered 413 unread. */
  public HttpOptions maxBodyBytes(int bytes) {
    return new HttpOptions(port, bind, token, user, password, readOnly, bytes, threads);
  }

  /** Threads serving requests, 1..64 (default 4); a pop with {@code wait} holds one while it waits. */
  public HttpOptions threads(int threads) {
    return new HttpOptions(port, bind, token, user, password, readOnly, maxBodyBytes, threads);
  }

  public int port() {
    return port;
  }

  public String bindAddress() {
    return bind;
  }

  public String token() {
    return token;
  }

  public String user() {
    return user;
  }

  public String password() {
    return password;
  }

  public boolean isReadOnly() {
    return readOnly;
  }

  public int maxBodyBytes() {
    return maxBodyBytes;
  }

  public int threads() {
    return threads;
  }

  /** True when a token or a basic-auth credential is set. */
  public boolean hasCredential() {
    return token != null || user != null;
  }

  /** Every problem with these options, each naming the option and its bound; empty when they are valid. */
  public List<String> problems() {
    List<String> errors = new ArrayList<>();
    if (port < 0 || port > 65535) {
      errors.add("http port must be 0..65535, was " + port);
    }
    if (token != null && user != null) {
      errors.add("http: give a token or a basic-auth credential, not both");
    }
    if (token != null && (token.length() < 16 || token.length() > 256 || !token.chars().allMatch(c -> c > 32 && c < 127))) {
      errors.add("http token must be 16..256 printable ASCII characters without spaces, was " + token.length()
          + " character(s)");
    }
    if (user != null && (user.isEmpty() || user.length() > 64 || user.indexOf(':') >= 0)) {
      errors.add("http basic-auth user must be 1..64 characters without ':'");
    }
    if (password != null && (password.length() < 8 || password.length() > 256)) {
      errors.add("http basic-auth password must be 8..256 characters, was " + password.length() + " character(s)");
    }
    if (maxBodyBytes < 1024 || maxBodyBytes > MAX_BODY_BYTES_LIMIT) {
      errors.add("http maxBodyBytes must be 1024.." + MAX_BODY_BYTES_LIMIT + ", was " + maxBodyBytes);
    }
    if (threads < 1 || threads > 64) {
      errors.add("http threads must be 1..64, was " + threads);
    }
    InetAddress address = null;
    try {
      address = InetAddress.getByName(bind);
    } catch (UnknownHostException e) {
      errors.add("http bindAddress '" + bind + "' does not resolve");
    }
    if (address != null && !address.isLoopbackAddress() && !hasCredential()) {
      errors.add("http bindAddress '" + bind + "' is not loopback: set a token(...) or basicAuth(...) first, or every"
          + " host that reaches it could push, pop and delete");
    }
    return errors;
  }

  @Override
  public String toString() {
    return "HttpOptions[" + bind + ":" + port + ", auth=" + (token != null ? "token" : user != null ? "basic(" + user
        + ")" : "none") + (readOnly ? ", read-only" : "") + ", maxBodyBytes=" + maxBodyBytes + ", threads=" + threads
        + "]";
  }
}
