package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Converts the payload of one schema version of a type to the next version ({@code from} to {@code from + 1}).
 * Registered per type and source version ({@link PayloadTypes.Builder#upcaster}); a reader that understands
 * version 3 reads a version 1 message through the 1→2 and 2→3 upcasters, in that order.
 *
 * <p>It runs on the consumer, at {@link Message#payload(Class)}, and in a Postgres sink before it maps a payload onto
 * columns (up to {@link PayloadTypes#newestVersion}), on a copy of the stored JSON (it may modify and return its
 * argument). The stored message is never changed: {@link Message#payload()} stays the JSON
 * as it was pushed. An upcaster that throws fails the read with a {@link PayloadTypeException}.
 */
@FunctionalInterface
public interface PayloadUpcaster {
  /**
   * @param payload the payload in the source version (a private copy)
   * @return the payload in the next version
   */
  JsonNode upcast(JsonNode payload);

  /** An upcaster for object payloads, for the common case of adding, renaming or dropping fields in place. */
  static PayloadUpcaster ofObject(java.util.function.Consumer<ObjectNode> change) {
    return p -> {
      if (!(p instanceof ObjectNode o)) {
        throw new IllegalArgumentException("the payload is not a JSON object but " + p.getNodeType());
      }
      change.accept(o);
      return o;
    };
  }
}
