package io.queen.pgconn.internal.sink;

import java.util.ArrayList;
import java.util.List;

/**
 * A {@code sql}-mode statement written with PostgreSQL's {@code $1..$n} placeholders, turned into JDBC's
 * {@code ?} and the list of which param each {@code ?} binds. Placeholders inside single-quoted literals,
 * double-quoted identifiers and comments ({@code --} to the end of the line, and {@code /* *\/}, which nest as
 * PostgreSQL's do) are left alone; dollar-quoted bodies are not supported.
 */
public record SqlStatement(String jdbc, List<Integer> binds) {

  public static SqlStatement parse(String sql) {
    StringBuilder out = new StringBuilder(sql.length());
    List<Integer> binds = new ArrayList<>();
    int i = 0;
    int n = sql.length();
    while (i < n) {
      char ch = sql.charAt(i);
      if (ch == '\'' || ch == '"') {
        int j = i + 1;
        while (j < n) {
          if (sql.charAt(j) == ch) {
            if (j + 1 < n && sql.charAt(j + 1) == ch) {
              j += 2;
              continue;
            }
            break;
          }
          j++;
        }
        out.append(sql, i, Math.min(n, j + 1));
        i = j + 1;
      } else if (ch == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
        int j = sql.indexOf('\n', i);
        j = j < 0 ? n : j;
        out.append(sql, i, j);
        i = j;
      } else if (ch == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
        int depth = 1;
        int j = i + 2;
        while (j < n && depth > 0) {
          if (sql.charAt(j) == '/' && j + 1 < n && sql.charAt(j + 1) == '*') {
            depth++;
            j += 2;
          } else if (sql.charAt(j) == '*' && j + 1 < n && sql.charAt(j + 1) == '/') {
            depth--;
            j += 2;
          } else {
            j++;
          }
        }
        out.append(sql, i, j);
        i = j;
      } else if (ch == '?') {
        out.append("??"); // pgjdbc's escape for a literal '?' (the jsonb operators)
        i++;
      } else if (ch == '$' && i + 1 < n && Character.isDigit(sql.charAt(i + 1))) {
        int j = i + 1;
        while (j < n && Character.isDigit(sql.charAt(j))) {
          j++;
        }
        // past 9 digits it is no placeholder a statement can have: counted as out of range (the validator refuses it)
        binds.add(j - i - 1 > 9 ? Integer.MAX_VALUE : Integer.parseInt(sql.substring(i + 1, j)));
        out.append('?');
        i = j;
      } else {
        out.append(ch);
        i++;
      }
    }
    return new SqlStatement(out.toString(), List.copyOf(binds));
  }

  /** The highest {@code $n} the statement uses (0 when none). */
  public static int highestPlaceholder(String sql) {
    int max = 0;
    for (int b : parse(sql).binds()) {
      max = Math.max(max, b);
    }
    return max;
  }
}
