package io.queen.pgconn.internal.source;

/** The {@link Codec} the stream uses: the decoding room's classes ({@link DecoderCodec}). */
final class Codecs {
  private Codecs() {}

  static Codec standard() {
    try {
      return (Codec) Class.forName("io.queen.pgconn.internal.source.DecoderCodec").getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("the pgoutput decoder is not in this build", e);
    }
  }
}
