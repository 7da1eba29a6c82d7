package io.queen.pgconn.internal.source;

/** The {@link Codec} the stream uses: the decoding room's classes ({@link DecoderCodec}). */
final class Codecs {
  private Codecs() {}

  static Codec standard() {
    return new DecoderCodec();
  }
}
