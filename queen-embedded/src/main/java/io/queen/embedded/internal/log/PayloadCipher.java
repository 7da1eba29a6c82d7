package io.queen.embedded.internal.log;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Seals and opens payloads of encrypted queues with AES-256-GCM: a random 12-byte nonce, the ciphertext and its
 * 16-byte tag, stored base64 as a JSON string in the payload column; the message id is the associated data, so
 * a sealed payload cannot be moved to another message. Each message stores the id of the key that sealed it:
 * the first 16 hex digits of SHA-256 over a fixed label and the key, so a key id says which key without saying
 * anything about it. The node seals with its current key and opens with the current or any older key.
 */
public final class PayloadCipher {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final byte[] LABEL = "queen payload key id v1".getBytes(StandardCharsets.US_ASCII);

  private final String currentId;
  private final byte[] current;
  private final Map<String, byte[]> keys;

  /**
   * @param current the key new payloads are sealed with (32 bytes), or {@code null}: this node then seals nothing
   * @param older keys that only open payloads sealed before a rotation
   */
  public PayloadCipher(byte[] current, Iterable<byte[]> older) {
    Map<String, byte[]> k = new LinkedHashMap<>();
    this.current = current;
    this.currentId = current == null ? null : keyId(current);
    if (current != null) {
      k.put(currentId, current.clone());
    }
    for (byte[] o : older) {
      k.putIfAbsent(keyId(o), o.clone());
    }
    this.keys = Map.copyOf(k);
  }

  /** The id of a key: 16 hex digits of SHA-256(label || key). */
  public static String keyId(byte[] key) {
    try {
      MessageDigest d = MessageDigest.getInstance("SHA-256");
      d.update(LABEL);
      return HexFormat.of().formatHex(d.digest(key), 0, 8);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("SHA-256 is not available in this JVM");
    }
  }

  /** Whether this node can seal (it has a current key). */
  public boolean canSeal() {
    return current != null;
  }

  /** Whether this node can open payloads sealed under {@code keyId}. */
  public boolean canOpen(String keyId) {
    return keys.containsKey(keyId);
  }

  /** The id stored with what this node seals, or {@code null}. */
  public String currentId() {
    return currentId;
  }

  /** The ids of every key this node holds (for error messages: ids only, never keys). */
  public java.util.Set<String> ids() {
    return keys.keySet();
  }

  /** The sealed form of a payload's JSON text: a JSON string (quoted base64). */
  public String seal(String json, UUID messageId) {
    try {
      byte[] nonce = new byte[12];
      RANDOM.nextBytes(nonce);
      Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
      c.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(current, "AES"), new GCMParameterSpec(128, nonce));
      c.updateAAD(aad(messageId));
      byte[] ct = c.doFinal(json.getBytes(StandardCharsets.UTF_8));
      byte[] out = new byte[12 + ct.length];
      System.arraycopy(nonce, 0, out, 0, 12);
      System.arraycopy(ct, 0, out, 12, ct.length);
      return '"' + Base64.getEncoder().encodeToString(out) + '"';
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-256-GCM is not available in this JVM: " + e.getClass().getName());
    }
  }

  /**
   * The JSON text of a sealed payload.
   *
   * @param stored the stored JSON text (a JSON string of base64)
   * @throws IllegalArgumentException when the text is not a sealed payload or fails the tag check (a payload
   *     changed in the table, or sealed for another message); the message says which, never the content
   */
  public String open(String stored, String keyId, UUID messageId) {
    byte[] key = keys.get(keyId);
    if (key == null) {
      throw new IllegalStateException("no key with id " + keyId);
    }
    byte[] sealed;
    try {
      if (stored.length() < 2 || stored.charAt(0) != '"' || stored.charAt(stored.length() - 1) != '"') {
        throw new IllegalArgumentException();
      }
      sealed = Base64.getDecoder().decode(stored.substring(1, stored.length() - 1));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("the stored payload is not a sealed payload (key id " + keyId + ")");
    }
    if (sealed.length < 12 + 16) {
      throw new IllegalArgumentException("the stored payload is too short to be sealed (key id " + keyId + ")");
    }
    try {
      Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
      c.init(Cipher.DECRYPT_MODE, new SecretKeySpec(key, "AES"), new GCMParameterSpec(128, sealed, 0, 12));
      c.updateAAD(aad(messageId));
      return new String(c.doFinal(sealed, 12, sealed.length - 12), StandardCharsets.UTF_8);
    } catch (AEADBadTagException e) {
      throw new IllegalArgumentException("the sealed payload fails its integrity check under key id " + keyId
          + " (changed in the table, or moved from another message)");
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-256-GCM is not available in this JVM: " + e.getClass().getName());
    }
  }

  private static byte[] aad(UUID id) {
    return ByteBuffer.allocate(16).putLong(id.getMostSignificantBits()).putLong(id.getLeastSignificantBits()).array();
  }
}
