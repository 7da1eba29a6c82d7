package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;

import io.queen.testkit.QueenPostgres;
import io.queen.testkit.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import org.junit.jupiter.api.Test;

@QueenPostgres
class TypeRegistryTest {
  @Test
  void theStaticTableAgreesWithPgType(TestDatabase db) throws Exception {
    try (Connection c = db.connection();
        PreparedStatement ps = c.prepareStatement("SELECT typname, typelem::int8, typcategory FROM pg_type WHERE oid = ?")) {
      TypeRegistry nothingResolved = new TypeRegistry(); // knows the built-ins only, all below FIRST_NORMAL_OID
      int checked = 0;
      for (int oid = 0; oid < TypeRegistry.FIRST_NORMAL_OID; oid++) {
        TypeRegistry.Info i = nothingResolved.info(oid);
        if (i == null) {
          continue;
        }
        checked++;
        ps.setLong(1, i.oid());
        try (ResultSet rs = ps.executeQuery()) {
          assertThat(rs.next()).as("oid %d", i.oid()).isTrue();
          assertThat(rs.getString(1)).as("oid %d", i.oid()).isEqualTo(i.name());
          if (i.kind() == TypeRegistry.Kind.ARRAY || i.oid() == 1020) {
            assertThat(rs.getLong(2)).as(i.name()).isEqualTo(i.elementOid());
            assertThat(rs.getString(3)).as(i.name()).isEqualTo("A");
          }
        }
      }
      assertThat(checked).as("built-in types checked").isGreaterThan(100);
    }
  }

  @Test
  void resolvesDomainsEnumsCompositesAndTheirArrays(TestDatabase db) throws Exception {
    try (Connection c = db.connection(); Statement st = c.createStatement()) {
      st.execute("CREATE TYPE color AS ENUM ('red')");
      st.execute("CREATE TYPE point2 AS (x int, y int)");
      st.execute("CREATE DOMAIN price AS numeric(10,2)");
      st.execute("CREATE DOMAIN price2 AS price");
      st.execute("CREATE DOMAIN ints AS int[]");
      st.execute("CREATE DOMAIN colors AS color[]");
      List<String> names = List.of("color", "_color", "point2", "_point2", "price", "price2", "_price2", "ints",
          "colors");
      int[] oids = new int[names.size()];
      for (int k = 0; k < names.size(); k++) {
        try (ResultSet rs = st.executeQuery("SELECT '" + names.get(k) + "'::regtype::oid::int8")) {
          rs.next();
          oids[k] = (int) rs.getLong(1);
        }
      }
      TypeRegistry t = new TypeRegistry();
      assertThat(t.known(oids[0])).isFalse();
      assertThat(t.kind(oids[0])).isEqualTo(TypeRegistry.Kind.TEXT);
      t.resolve(c, java.util.Arrays.stream(oids).boxed().toList());
      assertThat(t.kind(oids[0])).isEqualTo(TypeRegistry.Kind.TEXT);
      assertThat(t.kind(oids[1])).isEqualTo(TypeRegistry.Kind.TEXT);
      assertThat(t.kind(oids[2])).isEqualTo(TypeRegistry.Kind.TEXT);
      assertThat(t.kind(oids[3])).isEqualTo(TypeRegistry.Kind.TEXT);
      assertThat(t.kind(oids[4])).isEqualTo(TypeRegistry.Kind.NUMERIC);
      assertThat(t.kind(oids[5])).isEqualTo(TypeRegistry.Kind.NUMERIC);
      assertThat(t.kind(oids[6])).isEqualTo(TypeRegistry.Kind.ARRAY);
      assertThat(t.elementKind(oids[6])).isEqualTo(TypeRegistry.Kind.NUMERIC);
      assertThat(t.kind(oids[7])).isEqualTo(TypeRegistry.Kind.ARRAY);
      assertThat(t.elementKind(oids[7])).isEqualTo(TypeRegistry.Kind.INTEGER);
      assertThat(t.kind(oids[8])).isEqualTo(TypeRegistry.Kind.TEXT);
      assertThat(t.info(oids[5]).name()).isEqualTo("price2");
      assertThat(Values.text(t, oids[7], "{1,2}")).isEqualTo("[1,2]");
      assertThat(Values.text(t, oids[5], "3.50")).isEqualTo("3.50");
      // a 'Y' message under another name (the OID reused) drops what was loaded
      t.learn(new PgMessage.Type(oids[4], "public", "price"));
      assertThat(t.known(oids[4])).isTrue();
      t.learn(new PgMessage.Type(oids[4], "public", "other"));
      assertThat(t.known(oids[4])).isFalse();
    }
  }
}
