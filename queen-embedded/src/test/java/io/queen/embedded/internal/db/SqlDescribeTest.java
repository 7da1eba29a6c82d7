package io.queen.embedded.internal.db;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.BatchUpdateException;
import java.sql.SQLException;
import org.junit.jupiter.api.Test;

/** A failed JDBC batch is described without the statement text and values pgjdbc puts in its message. */
class SqlDescribeTest {

  @Test
  void aBatchUpdateExceptionIsDescribedByTheServersErrorWithoutTheEntry() {
    BatchUpdateException e = new BatchUpdateException("Batch entry 10 UPDATE accounts SET balance = balance +"
        + " ('358.05')::numeric WHERE id = ('3')::bigint was aborted: ERROR: terminating connection", "57P01", 0,
        new int[0], null);
    e.setNextException(new SQLException("terminating connection due to administrator command", "57P01"));
    String d = Sql.describe(e);
    assertThat(d).contains("57P01").contains("a batch entry failed: terminating connection due to administrator command")
        .doesNotContain("UPDATE").doesNotContain("358.05");

    BatchUpdateException data = new BatchUpdateException("Batch entry 0 INSERT INTO t VALUES ('secret') was aborted",
        "22P02", 0, new int[0], null);
    data.setNextException(new SQLException("invalid input syntax for type integer: \"secret\"", "22P02"));
    assertThat(Sql.describe(data)).contains("invalid input syntax for type integer").doesNotContain("secret")
        .doesNotContain("INSERT");

    BatchUpdateException bare = new BatchUpdateException("Batch entry 0 INSERT INTO t VALUES ('x') was aborted",
        "08006", 0, new int[0], null);
    assertThat(Sql.describe(bare)).contains("a batch entry failed").doesNotContain("INSERT");
  }
}
