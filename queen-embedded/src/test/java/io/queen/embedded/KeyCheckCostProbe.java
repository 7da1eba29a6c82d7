package io.queen.embedded;

import io.queen.PushItem;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * A rough probe, not a test (its name keeps it out of the default run; run it with {@code -Dtest=KeyCheckCostProbe}):
 * what pop's key check costs. The same auto-acking pop of one message, called with the caller's key ids and without
 * them (no check), interleaved, on a plain queue and on an encrypted one; prints the median time and the median
 * buffers (EXPLAIN ANALYZE of the call, which counts the function's own statements) as {@code FIGURE} lines.
 */
@QueenPostgres
class KeyCheckCostProbe {
  private static final String KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  private static final int ROUNDS = 1500;

  @Test
  void measure(DataSource ds) throws Exception {
    try (Queen a = EmbeddedQueen.builder().dataSource(ds).nodeId("probe").encryptionKey(KEY).adoptEncryptionKey()
        .listen(false).start()) {
      String id = io.queen.embedded.internal.log.PayloadCipher.keyId(java.util.HexFormat.of().parseHex(KEY));
      a.queue("sealed").configure(c -> c.encryption(true));
      for (String q : List.of("plain", "sealed")) {
        for (int chunk = 0; chunk < 4; chunk++) {
          List<PushItem> items = new ArrayList<>();
          for (int i = 0; i < 1000; i++) {
            items.add(PushItem.of("p" + (i % 20), Map.of("n", i)));
          }
          a.queue(q).push(items);
        }
      }
      try (Connection c = ds.getConnection()) {
        for (String q : List.of("plain", "sealed")) {
          long[][] ns = new long[2][ROUNDS];
          long[][] buffers = new long[2][ROUNDS];
          for (int r = 0; r < ROUNDS; r++) {
            for (int v = 0; v < 2; v++) {
              String keys = v == 0 ? "null" : "array['" + id + "']";
              String call = "select * from queen.pop('" + q + "', 'g" + v + "', 1, 1, null, null, 'probe', 'ALL', null,"
                  + " true, null, null, " + keys + ")";
              if (r % 2 == 0) {
                long t0 = System.nanoTime();
                try (PreparedStatement st = c.prepareStatement(call); ResultSet rs = st.executeQuery()) {
                  while (rs.next()) {
                    // drain
                  }
                }
                ns[v][r] = System.nanoTime() - t0;
              } else {
                try (PreparedStatement st = c.prepareStatement("explain (analyze, buffers, format json) " + call);
                    ResultSet rs = st.executeQuery()) {
                  rs.next();
                  com.fasterxml.jackson.databind.JsonNode plan = new com.fasterxml.jackson.databind.ObjectMapper()
                      .readTree(rs.getString(1)).get(0).get("Plan");
                  buffers[v][r] = plan.path("Shared Hit Blocks").asLong() + plan.path("Shared Read Blocks").asLong();
                }
              }
            }
          }
          for (int v = 0; v < 2; v++) {
            System.out.printf("FIGURE %s queue, pop %s: median %.3f ms, median %d buffers%n", q,
                v == 0 ? "without key ids (no check)" : "with key ids", median(ns[v], 0) / 1e6, median(buffers[v], 1));
          }
        }
      }
    }
  }

  private static long median(long[] values, int parity) {
    long[] picked = new long[values.length / 2];
    for (int i = 0; i < picked.length; i++) {
      picked[i] = values[2 * i + parity];
    }
    Arrays.sort(picked);
    return picked[picked.length / 2];
  }
}
