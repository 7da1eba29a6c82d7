/**
 * Queen's transaction bundle. Unsupported: anything in this package may change without notice; use
 * {@link io.queen.Transaction}.
 */
package io.queen.embedded.internal.tx;
