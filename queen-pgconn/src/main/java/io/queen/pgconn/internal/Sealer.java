package io.queen.pgconn.internal;

import io.queen.ConnectorException;
import io.queen.pgconn.internal.spec.ErrorCode;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Seals a connector's password with AES-256-GCM under the node's key: a version byte, a random 12-byte
 * nonce, the ciphertext and its 16-byte tag. The connector's name is the associated data, so a sealed
 * password cannot be moved to another connector. A wrong key fails the tag check and is reported, never
 * used.
 */
final class Sealer {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final byte VERSION = 1;

  private Sealer() {}

  static byte[] seal(byte[] key, String connector, String password) {
    if (key == null) {
      throw ErrorCode.NO_ENCRYPTION_KEY.exception(connector);
    }
    try {
      byte[] nonce = new byte[12];
      RANDOM.nextBytes(nonce);
      Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
      c.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(key, "AES"), new GCMParameterSpec(128, nonce));
      c.updateAAD(connector.getBytes(StandardCharsets.UTF_8));
      byte[] ct = c.doFinal(password.getBytes(StandardCharsets.UTF_8));
      byte[] out = new byte[1 + 12 + ct.length];
      out[0] = VERSION;
      System.arraycopy(nonce, 0, out, 1, 12);
      System.arraycopy(ct, 0, out, 13, ct.length);
      return out;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-256-GCM is not available in this JVM: " + e.getClass().getName());
    }
  }

  static String open(byte[] key, String connector, byte[] sealed) {
    if (key == null) {
      throw ErrorCode.NO_ENCRYPTION_KEY.exception(connector);
    }
    if (sealed.length < 13 + 16 || sealed[0] != VERSION) {
      throw ErrorCode.WRONG_ENCRYPTION_KEY.exception(connector);
    }
    try {
      Cipher c = Cipher.getInstance("AES/GCM/NoPadding");
      c.init(Cipher.DECRYPT_MODE, new SecretKeySpec(key, "AES"), new GCMParameterSpec(128, sealed, 1, 12));
      c.updateAAD(connector.getBytes(StandardCharsets.UTF_8));
      return new String(c.doFinal(sealed, 13, sealed.length - 13), StandardCharsets.UTF_8);
    } catch (AEADBadTagException e) {
      throw ErrorCode.WRONG_ENCRYPTION_KEY.exception(connector);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("AES-256-GCM is not available in this JVM: " + e.getClass().getName());
    }
  }

}
