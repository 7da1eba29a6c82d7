package io.queen.pgconn.internal.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import io.queen.Queen;
import io.queen.embedded.EmbeddedQueen;
import io.queen.pgconn.ConnectorOptions;
import io.queen.pgconn.internal.spec.ErrorCode;
import io.queen.pgconn.internal.spec.SourceSpec;
import io.queen.testkit.EnabledForPostgresVersion;
import io.queen.testkit.QueenPostgres;
import io.queen.testkit.RequiresLogicalReplication;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The source's setup checks, publication and slot handling, and its lease, on a real PostgreSQL 17. */
@QueenPostgres
@EnabledForPostgresVersion(min = 17, reason = "the source connector refuses older servers with server_version")
@RequiresLogicalReplication
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SourceSetupTest {

  static SourceSpec spec(String name, String publication, boolean manage, String... tables) {
    List<SourceSpec.Table> ts = new java.util.ArrayList<>();
    for (String t : tables) {
      ts.add(new SourceSpec.Table("public", t, t, List.of(), false));
    }
    return new SourceSpec(name, true, null, ts, publication, manage, 1000, 4 << 20, 2000, "never", false);
  }

  static void sql(Connection c, String s) throws Exception {
    try (Statement st = c.createStatement()) {
      st.execute(s);
    }
  }

  static boolean publicationExists(Connection c, String name) throws Exception {
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select count(*) from pg_publication where pubname = '" + name + "'")) {
      rs.next();
      return rs.getInt(1) == 1;
    }
  }

  @Test
  void aTableWithoutAKeyIsRefusedBeforeThePublicationIsTouched(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection()) {
      sql(c, "create table nokey (a int, b text)");
      SourceSpec s = spec("nokey-src", "queen_nokey_src", true, "nokey");
      assertThatThrownBy(() -> SourceSetup.check(c, s)).isInstanceOfSatisfying(SourceSetup.Failed.class,
          f -> assertThat(f.code).isEqualTo(ErrorCode.SOURCE_NO_KEY));
      assertThat(publicationExists(c, "queen_nokey_src")).isFalse();
      assertThatThrownBy(() -> SourceSetup.check(c, spec("x", "p", true, "missing_table")))
          .isInstanceOfSatisfying(SourceSetup.Failed.class, f -> assertThat(f.code).isEqualTo(ErrorCode.SOURCE_TABLE_MISSING));
      sql(c, "create table ri (a int not null, b text)");
      sql(c, "create unique index ri_a on ri (a)");
      assertThatThrownBy(() -> SourceSetup.check(c, spec("ri", "p", true, "ri")))
          .isInstanceOfSatisfying(SourceSetup.Failed.class, f -> assertThat(f.code).isEqualTo(ErrorCode.SOURCE_NO_KEY));
      sql(c, "alter table ri replica identity using index ri_a");
      SourceSetup.check(c, spec("ri", "p", true, "ri")); // a unique index as replica identity is a key
    }
  }

  /**
   * A partitionBy column must be a column of its table, and in its replica identity, or a delete (which carries only
   * the identity's old values) would land in partition \N; both are refused before the publication is touched.
   */
  @Test
  void partitionByColumnsMustExistAndBeInTheReplicaIdentity(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection()) {
      sql(c, "create table orders_by (id bigint primary key, customer_id bigint not null, note text)");
      SourceSpec missing = by("orders_by", "nope");
      assertThatThrownBy(() -> SourceSetup.check(c, missing)).isInstanceOfSatisfying(SourceSetup.Failed.class, f -> {
        assertThat(f.code).isEqualTo(ErrorCode.PARTITION_COLUMN);
        assertThat(f.getMessage()).isEqualTo("table public.orders_by, partitionBy column nope");
      });
      SourceSpec byCustomer = by("orders_by", "customer_id");
      assertThatThrownBy(() -> SourceSetup.check(c, byCustomer)).isInstanceOfSatisfying(SourceSetup.Failed.class,
          f -> assertThat(f.code).isEqualTo(ErrorCode.PARTITION_IDENTITY));
      assertThat(publicationExists(c, "queen_by_src")).isFalse();
      SourceSetup.check(c, by("orders_by", "id")); // a key column is in the default identity
      sql(c, "create unique index orders_by_cid on orders_by (customer_id, id)");
      sql(c, "alter table orders_by replica identity using index orders_by_cid");
      SourceSetup.check(c, byCustomer);
      assertThatThrownBy(() -> SourceSetup.check(c, by("orders_by", "note"))).isInstanceOfSatisfying(
          SourceSetup.Failed.class, f -> assertThat(f.code).isEqualTo(ErrorCode.PARTITION_IDENTITY));
      sql(c, "alter table orders_by replica identity full");
      SourceSetup.check(c, by("orders_by", "note"));
    }
  }

  /**
   * A partitioned table: a managed publication is created (or altered) to publish its changes under the table's own
   * name; a publication the source does not manage that publishes them under the partitions' names is refused.
   */
  @Test
  void aPartitionedTableNeedsAPublicationThatPublishesThroughItsRoot(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection()) {
      sql(c, "create table parted (id bigint not null, at date not null, note text, primary key (id, at))"
          + " partition by range (at)");
      sql(c, "create table parted_a partition of parted for values from ('2025-01-01') to ('2026-01-01')");
      // each partition writes its WAL with its own replica identity, and the root's does not reach them
      sql(c, "alter table parted replica identity full");
      assertThatThrownBy(() -> SourceSetup.check(c, by("parted", "note"))).isInstanceOfSatisfying(
          SourceSetup.Failed.class, f -> assertThat(f.code).isEqualTo(ErrorCode.PARTITION_IDENTITY));
      sql(c, "alter table parted_a replica identity full");
      SourceSetup.check(c, by("parted", "note"));
      SourceSpec managed = spec("parted-src", "queen_parted_src", true, "parted");
      SourceSetup.check(c, managed);
      SourceSetup.publication(c, managed);
      assertThat(viaRoot(c, "queen_parted_src")).isTrue();
      sql(c, "create publication by_leaf for table parted");
      assertThatThrownBy(() -> SourceSetup.publication(c, spec("p2", "by_leaf", false, "parted")))
          .isInstanceOfSatisfying(SourceSetup.Failed.class,
              f -> assertThat(f.code).isEqualTo(ErrorCode.PUBLICATION_VIA_ROOT));
      SourceSetup.publication(c, spec("p3", "by_leaf", true, "parted")); // managed: set through the root
      assertThat(viaRoot(c, "by_leaf")).isTrue();
      SourceSetup.publication(c, spec("p2", "by_leaf", false, "parted"));
    }
  }

  private static boolean viaRoot(Connection c, String pub) throws Exception {
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("select pubviaroot from pg_publication where pubname = '" + pub + "'")) {
      return rs.next() && rs.getBoolean(1);
    }
  }

  private static SourceSpec by(String table, String column) {
    return new SourceSpec("by-src", true, null, List.of(new SourceSpec.Table("public", table, table, List.of(column),
        false)), "queen_by_src", true, 1000, 4 << 20, 2000, "never", false);
  }

  @Test
  void aManagedPublicationIsCreatedAndAFilteredOneRefused(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection()) {
      sql(c, "create table orders (id bigint primary key, status text)");
      sql(c, "create table items (id bigint primary key, qty int)");
      SourceSpec s = spec("orders-src", "queen_orders_src", true, "orders");
      SourceSetup.check(c, s);
      SourceSetup.publication(c, s);
      assertThat(publicationExists(c, "queen_orders_src")).isTrue();
      SourceSetup.publication(c, spec("orders-src", "queen_orders_src", true, "orders", "items")); // adds items
      SourceSetup.publication(c, spec("o2", "queen_orders_src", false, "orders", "items"));
      assertThatThrownBy(() -> SourceSetup.publication(c, spec("o3", "absent_pub", false, "orders")))
          .isInstanceOfSatisfying(SourceSetup.Failed.class, f -> {
            assertThat(f.code).isEqualTo(ErrorCode.PUBLICATION_MISSING);
            assertThat(f.getMessage()).isEqualTo("publication absent_pub does not exist");
          });
      sql(c, "create publication filtered for table orders where (status <> 'x')");
      assertThatThrownBy(() -> SourceSetup.publication(c, spec("o4", "filtered", false, "orders")))
          .isInstanceOfSatisfying(SourceSetup.Failed.class,
              f -> assertThat(f.code).isEqualTo(ErrorCode.PUBLICATION_FILTERED));
      sql(c, "create publication columns for table orders (id)");
      assertThatThrownBy(() -> SourceSetup.publication(c, spec("o5", "columns", false, "orders")))
          .isInstanceOfSatisfying(SourceSetup.Failed.class,
              f -> assertThat(f.code).isEqualTo(ErrorCode.PUBLICATION_FILTERED));
    }
  }

  @Test
  void theSlotIsCreatedReadAndDropped(DataSource ds) throws Exception {
    try (Connection c = ds.getConnection()) {
      assertThat(SourceSetup.slot(c, "queen_setup_slot").exists()).isFalse();
      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(
          "select lsn::text from pg_create_logical_replication_slot('queen_setup_slot', 'pgoutput')")) {
        rs.next();
      }
      SourceSetup.Slot slot = SourceSetup.slot(c, "queen_setup_slot");
      assertThat(slot.exists()).isTrue();
      assertThat(slot.invalidated()).isFalse();
      assertThat(slot.plugin()).isEqualTo("pgoutput");
      assertThat(slot.confirmedFlushLsn()).matches("[0-9A-F]+/[0-9A-F]+");
      assertThat(SourceSetup.dropSlot(c, "queen_setup_slot")).isTrue();
      assertThat(SourceSetup.slot(c, "queen_setup_slot").exists()).isFalse();
    }
  }

  @Test
  void theLeaseHasOneHolderRunsOutWhenAbandonedAndIsGivenBackAtOnce(DataSource ds) throws Exception {
    try (Queen a = EmbeddedQueen.builder().dataSource(ds).connectors(ConnectorOptions.defaults().run(false)).start();
        Queen b = EmbeddedQueen.builder().dataSource(ds).connectors(ConnectorOptions.defaults().run(false)).start()) {
      Lease la = new Lease(a.kv(), "lease-src", "node-a", Duration.ofSeconds(1));
      Lease lb = new Lease(b.kv(), "lease-src", "node-b", Duration.ofSeconds(1));
      assertThat(la.acquire()).isTrue();
      assertThat(lb.acquire()).isFalse();
      assertThat(la.renew()).isTrue();
      assertThat(Lease.read(b.kv(), "lease-src").value().path("node").asText()).isEqualTo("node-a");
      la.abandon(); // a crash: neither renewed nor given back
      Thread.sleep(1_200);
      assertThat(lb.acquire()).isTrue();
      assertThat(new Lease(a.kv(), "lease-src", "node-a", Duration.ofSeconds(1)).renew()).isFalse();
      lb.release(); // given back at once
      assertThat(la.acquire()).isTrue();
      la.release();
    }
  }
}
