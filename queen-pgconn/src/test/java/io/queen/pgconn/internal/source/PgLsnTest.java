package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import org.junit.jupiter.api.Test;

@QueenPostgres
class PgLsnTest {
  @Test
  void formatsAsPostgresqlPrints() throws Exception {
    assertThat(PgLsn.format(0x1526990L)).isEqualTo("0/1526990");
    assertThat(PgLsn.format(0L)).isEqualTo("0/0");
    assertThat(PgLsn.format(0x16_B374D848L)).isEqualTo("16/B374D848");
    assertThat(PgLsn.format(-1L)).isEqualTo("FFFFFFFF/FFFFFFFF");
    assertThat(PgLsn.hex16(0x1570D68L)).isEqualTo("0000000001570D68");
    assertThat(PgLsn.hex16(-1L)).isEqualTo("FFFFFFFFFFFFFFFF");
  }

  @Test
  void agreesWithTheServer(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT l::text, (l - '0/0')::text FROM (VALUES (pg_current_wal_lsn()),"
            + " ('ABCDEF01/A'::pg_lsn), ('FFFFFFFF/FFFFFFFF'::pg_lsn), ('0/0'::pg_lsn)) v(l)")) {
      int n = 0;
      while (rs.next()) {
        long value = new java.math.BigInteger(rs.getString(2)).longValue();
        assertThat(PgLsn.format(value)).isEqualTo(rs.getString(1));
        assertThat(PgLsn.parse(rs.getString(1))).isEqualTo(value);
        n++;
      }
      assertThat(n).isEqualTo(4);
    }
  }

  @Test
  void parsesEitherCaseAndRefusesEverythingElse() {
    assertThat(PgLsn.parse("0/1526990")).isEqualTo(0x1526990L);
    assertThat(PgLsn.parse("16/b374d848")).isEqualTo(0x16_B374D848L);
    assertThat(PgLsn.parse("00000000/00000001")).isEqualTo(1L);
    for (String bad : new String[] {"", "1526990", "0/", "/1", "G/1", "123456789/0", "0/123456789", "0/1/2",
        " 0/1", "0/1 ", "-1/0", "+1/0", "0x1/0"}) {
      assertThatThrownBy(() -> PgLsn.parse(bad)).as(bad).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("expected two groups of 1 to 8 hex digits");
    }
    assertThatThrownBy(() -> PgLsn.parse(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> PgLsn.parse("x".repeat(1000))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageNotContaining("x".repeat(100));
  }
}
