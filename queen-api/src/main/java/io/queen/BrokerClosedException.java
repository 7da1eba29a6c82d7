package io.queen;

/**
 * The {@link Queen} instance (or the subscription) was closed; no new work is accepted. Thrown by every call
 * that would do work after {@link Queen#close()}, including calls on objects obtained before the close
 * (queues, consumers, the KV store, transactions, dead letters).
 */
public final class BrokerClosedException extends QueenException {
  private static final long serialVersionUID = 1L;

  public BrokerClosedException(String what) {
    super(what + " is closed");
  }
}
