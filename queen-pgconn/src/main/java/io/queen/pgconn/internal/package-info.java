/** The implementation of queen-pgconn: unsupported, and may change in any release. */
package io.queen.pgconn.internal;
