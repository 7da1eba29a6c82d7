/**
 * The validated, immutable configuration of a node, one record per part; each part of the node receives the parts it
 * reads. Depends on nothing else of the node. Unsupported: anything in this package may change without notice.
 */
package io.queen.embedded.internal.config;
