/**
 * What the sink, the source and the registry share, unsupported and liable to change in any release: the validated
 * documents ({@code SinkSpec}, {@code SourceSpec} and the connection block), the closed set of error codes with their
 * fixes ({@code ErrorCode}), and the identifier rule and quoting ({@code Ident}). The bottom of the module's
 * packages: it imports only queen-api, never another {@code io.queen.pgconn} package.
 */
package io.queen.pgconn.internal.spec;
