package io.queen.pgconn.internal.spec;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.SQLException;
import org.junit.jupiter.api.Test;

/**
 * How a refused connection is named. pgjdbc translates its own messages to the JVM's language, so the classification
 * must not rest on English words: its 08004 for "the server asked for a password and none was given" is told apart
 * from its other 08004 (a server without the SSL the URL requires) by whether the connection had a password. (The
 * exceptions are built here, as pgjdbc builds them: the server in the tests trusts local logins and never asks.)
 */
class ErrorCodeTest {

  /** pgjdbc's German text for the missing password, as a JVM with a German locale shows it. */
  private static final String GERMAN = "Der Server verlangt passwortbasierte Authentifizierung, jedoch wurde kein Passwort"
      + " angegeben.";

  @Test
  void aMissingPasswordIsALoginFailureInAnyLanguage() {
    assertThat(ErrorCode.ofLogin(new SQLException(GERMAN, "08004"), false)).isEqualTo(ErrorCode.LOGIN_FAILED);
    assertThat(ErrorCode.ofLogin(new SQLException("The server requested password-based authentication, but no password"
        + " was provided.", "08004"), false)).isEqualTo(ErrorCode.LOGIN_FAILED);
  }

  @Test
  void anotherRejectionWithAPasswordGivenIsNotALoginFailure() {
    assertThat(ErrorCode.ofLogin(new SQLException("The server does not support SSL.", "08004"), true)).isNull();
    assertThat(ErrorCode.ofLogin(new SQLException("Connection refused", "08001"), false)).isNull();
  }

  @Test
  void theServersOwnCodesDecideWhateverTheText() {
    assertThat(ErrorCode.ofLogin(new SQLException("x", "28P01"), true)).isEqualTo(ErrorCode.LOGIN_FAILED);
    assertThat(ErrorCode.ofLogin(new SQLException("x", "28000"), true)).isEqualTo(ErrorCode.LOGIN_FAILED);
    assertThat(ErrorCode.ofLogin(new SQLException("x", "3D000"), true)).isEqualTo(ErrorCode.DATABASE_MISSING);
  }
}
