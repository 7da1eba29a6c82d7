/**
 * Queen's implementation. Unsupported: anything in this package may change without notice; use the
 * {@code io.queen} API and {@code io.queen.embedded.EmbeddedQueen}.
 */
package io.queen.embedded.internal;
