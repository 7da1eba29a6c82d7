/**
 * The connector registry of queen-pgconn, unsupported and liable to change in any release: {@code PgConnProvider}
 * (found through {@code ServiceLoader}), {@code Registry} (the documents in {@code <schema>.connectors}, the sinks and
 * sources it starts and stops), {@code Documents} and {@code DocumentValidator} (a JSON document to a validated spec),
 * {@code CdcMix} (the rule between cdc sinks and the sources filling their queues, checked at put) and {@code Sealer}
 * (passwords sealed at rest). The top of the module's packages: it may import
 * {@link io.queen.pgconn.internal.sink}, {@link io.queen.pgconn.internal.source} and
 * {@link io.queen.pgconn.internal.spec}; none of them imports it.
 */
package io.queen.pgconn.internal;
