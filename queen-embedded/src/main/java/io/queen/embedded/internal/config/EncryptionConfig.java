package io.queen.embedded.internal.config;

import java.util.List;

/**
 * The node's AES-256 key (32 bytes, or null when none), the older keys it still opens payloads with, and whether it
 * adds its key to the cluster's at start. The key bytes are never printed: {@link #toString()} says only whether a
 * key is set and how many older ones there are.
 */
public record EncryptionConfig(byte[] key, List<byte[]> oldKeys, boolean adopt) {
  public EncryptionConfig {
    oldKeys = List.copyOf(oldKeys);
  }

  /** No key. */
  public static EncryptionConfig none() {
    return new EncryptionConfig(null, List.of(), false);
  }

  /** As the start-up line says it: {@code set}, {@code set (adopt)} or {@code none}. */
  public String describe() {
    return key != null ? "set" + (adopt ? " (adopt)" : "") : "none";
  }

  @Override
  public String toString() {
    return "EncryptionConfig[key=" + describe() + ", oldKeys=" + oldKeys.size() + "]";
  }
}
