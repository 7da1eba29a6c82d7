package io.queen;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a payload class as a typed payload: a stable type name and the schema version this class reads and
 * writes. A push of an instance stores {@code name} and {@code version} with the message (never the Java
 * class name, so the class may be renamed or moved); {@link Message#payload(Class)} with this class checks
 * them, upcasting older versions through the registered {@link PayloadUpcaster}s and refusing another type or
 * a newer version with a {@link PayloadTypeException}.
 *
 * <pre>{@code
 * @QueenType(name = "order", version = 2)
 * record Order(String id, long amountCents, String currency) {}
 * }</pre>
 *
 * <p>The same can be said without the annotation, on the builder: {@code payloadType(Order.class, "order", 2)};
 * a registration on the builder wins over the annotation.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface QueenType {
  /** The type name stored with each message: {@code [A-Za-z0-9._:-]{1,128}}, stable across class renames. */
  String name();

  /** The schema version this class understands, from 1. */
  int version();
}
