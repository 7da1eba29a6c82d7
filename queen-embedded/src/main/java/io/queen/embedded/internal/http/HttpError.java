package io.queen.embedded.internal.http;

/** A failure the routes answer with as it is: status, code, sentence (never a payload or statement text). */
final class HttpError extends RuntimeException {
  final int status;
  final String code;
  final String field;

  HttpError(int status, String code, String message) {
    this(status, code, message, null);
  }

  HttpError(int status, String code, String message, String field) {
    super(message, null, false, false);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}
