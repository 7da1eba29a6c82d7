package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;

/**
 * One key as read. {@code found} is distinct from the value: a stored JSON null is
 * {@code found=true, value=NullNode}; an absent or expired key is {@code found=false, value=null}.
 *
 * @param key the key
 * @param found whether a live key exists
 * @param value its value (a Jackson tree), or {@code null} when not found
 * @param version its version, or 0 when not found: every write gives the key a new one from one sequence of the
 *     store, so a version is never given twice, even to a key deleted or expired and written again; compare
 *     versions for equality only (they grow with the key's writes, but not by one)
 * @param expiresAt its expiry, or {@code null} when it lives forever or was not found
 */
public record KvEntry(String key, boolean found, JsonNode value, long version, Instant expiresAt) {}
