/** The node's HTTP surface and dashboard; internal, unsupported, and may change without notice. */
package io.queen.embedded.internal.http;
