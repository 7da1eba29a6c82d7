package io.queen.embedded;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.queen.Json;
import io.queen.Kv;
import io.queen.Message;
import io.queen.Queen;
import io.queen.testkit.QueenPostgres;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Payloads and KV values read back with exactly the digits that were written: decimals keep their scale
 * ({@code 42.00}), numbers beyond a double's 53 bits stay exact, the source connector's numeric(30,10) columns
 * arrive whole. Typed reads still convert.
 */
@QueenPostgres
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ExactNumbersTest {
  static final String DOC = "{\"total\": 42.00, \"wide\": 12345678901234567890.1234567890, \"big\": 9007199254740993,"
      + " \"huge\": 123456789012345678901234567890, \"small\": 1.5e-7, \"list\": [0.10, 2]}";

  private Queen queen;

  @BeforeEach
  void start(DataSource ds) {
    queen = EmbeddedQueen.builder().dataSource(ds).start();
  }

  @AfterEach
  void stop() {
    queen.close();
  }

  @com.fasterxml.jackson.annotation.JsonIgnoreProperties(ignoreUnknown = true)
  record Typed(double total, long big) {}

  @Test
  void payloadsKeepEveryDigit() {
    queen.queue("exact").partition("p").push(Json.of(DOC));
    List<Message> got = queen.queue("exact").consumer().batch(10).pop();
    assertThat(got).hasSize(1);
    JsonNode p = got.get(0).payload();
    assertThat(p.get("total").toString()).isEqualTo("42.00");
    assertThat(p.get("total").decimalValue()).isEqualTo(new BigDecimal("42.00"));
    assertThat(p.get("wide").decimalValue()).isEqualTo(new BigDecimal("12345678901234567890.1234567890"));
    assertThat(p.get("big").longValue()).isEqualTo(9007199254740993L);
    assertThat(p.get("huge").bigIntegerValue()).isEqualTo(new BigInteger("123456789012345678901234567890"));
    assertThat(p.get("list").get(0).toString()).isEqualTo("0.10");
    // written again (a consumer that forwards the payload) it is the same text
    assertThat(p.toString()).contains("\"total\":42.00").contains("\"wide\":12345678901234567890.1234567890");

    @SuppressWarnings("unchecked")
    Map<String, Object> untyped = got.get(0).payload(Map.class);
    assertThat(untyped.get("total")).isEqualTo(new BigDecimal("42.00"));
    Typed typed = got.get(0).payload(Typed.class);
    assertThat(typed.total()).isEqualTo(42.0);
    assertThat(typed.big()).isEqualTo(9007199254740993L);
  }

  @Test
  void kvValuesKeepEveryDigit() {
    queen.kv().put("exact", "k", Json.of(DOC), Kv.forever());
    JsonNode v = queen.kv().get("exact", "k").value();
    assertThat(v.get("total").toString()).isEqualTo("42.00");
    assertThat(v.get("wide").decimalValue()).isEqualTo(new BigDecimal("12345678901234567890.1234567890"));
  }
}
