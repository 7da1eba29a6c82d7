package io.queen.embedded.spi;

import java.util.List;
import java.util.Objects;

/**
 * One module's part of Queen's schema, applied by the node's migrator at start (before anything else runs) under the
 * migration lock, into Queen's schema. Its SQL files are resources beside {@code anchor}:
 * {@code <root>/migrations/<file>} and {@code <root>/functions/<file>}.
 *
 * <p>{@code migrations} ({@code V<n>__<name>.sql}, in order) hold tables, indexes, types, sequences and triggers; each
 * runs once, in its own transaction, recorded in {@code <schema>.schema_version} under {@code name}. A released
 * migration never changes: a change to a table is a new migration appended to the list. A migration that needs
 * functions while it runs (a trigger's function) names them in a line {@code -- requires functions: a, b}, and those
 * files are applied just before it.
 *
 * <p>{@code functions} ({@code <function>.sql}, one file per function name, its overloads together) hold
 * {@code create or replace function} statements with their settings. A file is applied again whenever its checksum
 * differs from the one recorded in {@code <schema>.function_version}; the overloads of that name it no longer defines
 * are dropped, and a file that is removed from the list drops the functions of its name. Dependencies first: a
 * {@code language sql} function's body is checked when it is created.
 *
 * <p>In the files, {@code ${schema}} stands for the quoted schema name and {@code ${schema_literal}} for the schema
 * name as a SQL string.
 *
 * @param name the module's key in the version tables ({@code queen} for the core)
 * @param anchor a class of the module, whose class loader finds the resources
 * @param root the resource folder, absolute (e.g. {@code /io/queen/pgconn/sql})
 * @param migrations the migration files, in order
 * @param functions the function files, dependencies first
 */
public record SchemaModule(String name, Class<?> anchor, String root, List<String> migrations, List<String> functions) {
  public SchemaModule {
    Objects.requireNonNull(name, "name must not be null");
    Objects.requireNonNull(anchor, "anchor must not be null");
    Objects.requireNonNull(root, "root must not be null");
    migrations = List.copyOf(migrations);
    functions = List.copyOf(functions);
    for (String m : migrations) {
      if (!m.matches("V[1-9][0-9]*__[a-z0-9_]+\\.sql")) {
        throw new IllegalArgumentException("migration " + m + " of " + name + ": allowed is V<n>__<name>.sql");
      }
    }
    for (String f : functions) {
      if (!f.matches("[a-z_][a-z0-9_]*\\.sql")) {
        throw new IllegalArgumentException("function file " + f + " of " + name + ": allowed is <function>.sql");
      }
    }
  }

  /** The version of a migration file ({@code V12__x.sql}: 12). */
  public static int version(String migration) {
    return Integer.parseInt(migration.substring(1, migration.indexOf("__")));
  }
}
