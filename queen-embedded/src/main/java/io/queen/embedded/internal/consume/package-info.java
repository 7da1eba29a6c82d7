/**
 * Queen's consume loop: the subscription's claimer and workers, the builder that starts them, and the coalesced
 * acknowledgements. Unsupported: anything in this package may change without notice; use
 * {@link io.queen.ConsumerBuilder} and {@link io.queen.Subscription}.
 */
package io.queen.embedded.internal.consume;
