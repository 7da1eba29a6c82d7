package io.queen.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/**
 * A small JSON client over {@code java.net.http} for tests of a node's HTTP surface: each call is one request, and
 * an answer keeps its status, body and headers. Not thread-safe (the credential is a field).
 */
public final class HttpCalls {
  static final ObjectMapper JSON = new ObjectMapper();
  private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String base;
  private String auth;

  /** Calls {@code http://127.0.0.1:<port>}. */
  public HttpCalls(java.net.InetSocketAddress address) {
    this.base = "http://127.0.0.1:" + address.getPort();
  }

  public String base() {
    return base;
  }

  public HttpCalls auth(String header) {
    this.auth = header;
    return this;
  }

  /** One answer: its status and its body, parsed as JSON when it is JSON. */
  public record Answer(int status, String body, java.net.http.HttpHeaders headers) {
    public JsonNode json() {
      try {
        return JSON.readTree(body);
      } catch (IOException e) {
        throw new AssertionError("not JSON (" + status + "): " + body, e);
      }
    }

    @Override
    public String toString() {
      return status + " " + body;
    }
  }

  public Answer get(String path) {
    return send(builder(path).GET());
  }

  public Answer delete(String path) {
    return send(builder(path).DELETE());
  }

  public Answer post(String path, String json) {
    return send(builder(path).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(json)));
  }

  public Answer put(String path, String json) {
    return send(builder(path).header("Content-Type", "application/json")
        .PUT(HttpRequest.BodyPublishers.ofString(json)));
  }

  /** Any request; {@code headers} are name/value pairs added to it. */
  public Answer send(String method, String path, String contentType, byte[] body, String... headers) {
    HttpRequest.Builder b = builder(path).method(method, HttpRequest.BodyPublishers.ofByteArray(body));
    if (contentType != null) {
      b.header("Content-Type", contentType);
    }
    for (int i = 0; i + 1 < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return send(b);
  }

  private HttpRequest.Builder builder(String path) {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(60));
    if (auth != null) {
      b.header("Authorization", auth);
    }
    return b;
  }

  private Answer send(HttpRequest.Builder b) {
    try {
      HttpResponse<String> r = client.send(b.build(), HttpResponse.BodyHandlers.ofString());
      return new Answer(r.statusCode(), r.body(), r.headers());
    } catch (IOException e) {
      throw new AssertionError("request failed", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }
}
