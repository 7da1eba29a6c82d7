/**
 * The bottom of Queen's implementation, what every other package stands on and which imports none of them: the one
 * boundary where an {@code SQLException} becomes a {@code QueenDatabaseException} ({@link
 * io.queen.embedded.internal.db.Sql}), the READ COMMITTED guard on the node's {@code DataSource}, the schema
 * migrator, and the throttle that summarises repeated failures in the log. Unsupported: anything in this package may
 * change without notice.
 */
package io.queen.embedded.internal.db;
