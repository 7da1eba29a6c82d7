package io.queen;

import java.util.List;

/**
 * One page of a prefix read, in byte order of the keys (C collation).
 *
 * @param rows the keys of this page
 * @param truncated true when more keys with the prefix follow (the key or byte ceiling cut the page)
 * @param next pass as {@code after} to read the next page, or {@code null} when not truncated
 */
public record KvPage(List<KvEntry> rows, boolean truncated, String next) {}
