package io.queen;

/** The {@link Queen} instance (or the subscription) was closed; no new work is accepted. */
public final class BrokerClosedException extends QueenException {
  private static final long serialVersionUID = 1L;

  public BrokerClosedException(String what) {
    super(what + " is closed");
  }
}
