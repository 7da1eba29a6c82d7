/**
 * The connector SPI: the few things a connector module (queen-pgconn) needs from a running node, and
 * nothing else. A connector module implements {@link io.queen.embedded.spi.ConnectorProvider} and lists
 * it in {@code META-INF/services}; the node finds it with {@link java.util.ServiceLoader} at start, hands
 * it a {@link io.queen.embedded.spi.ConnectorHost}, and closes the {@link io.queen.embedded.spi.ConnectorPlugin}
 * it returns on {@link io.queen.Queen#close()}. Types cross one way: this package depends only on
 * queen-api; queen-embedded's {@code internal} packages implement it; a connector module sees only this
 * package and queen-api. Supported for Queen's own modules; it may change between minor versions.
 */
package io.queen.embedded.spi;
