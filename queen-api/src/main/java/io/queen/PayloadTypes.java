package io.queen;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The payload types a node knows: which class is which type name and schema version (registered, or
 * {@link QueenType} on the class) and the upcasters between versions. Immutable and thread-safe; built once
 * by the node's builder ({@code payloadType(...)}, {@code upcaster(...)}).
 */
public final class PayloadTypes {
  /** The allowed type names. */
  public static final Pattern NAME = Pattern.compile("[A-Za-z0-9._:-]{1,128}");
  /** No registrations: types come from {@link QueenType} annotations alone, and there are no upcasters. */
  public static final PayloadTypes NONE = new Builder().build();

  /** A type name and the schema version of one class. */
  public record Type(String name, int version) {
    public Type {
      Objects.requireNonNull(name, "name must not be null");
      if (!NAME.matcher(name).matches()) {
        throw new IllegalArgumentException("payload type name '" + name + "' is invalid: allowed is " + NAME.pattern());
      }
      if (version < 1) {
        throw new IllegalArgumentException("payload type '" + name + "': version must be >= 1, was " + version);
      }
    }
  }

  private static final ClassValue<Type> ANNOTATED = new ClassValue<>() {
    @Override
    protected Type computeValue(Class<?> c) {
      QueenType t = c.getAnnotation(QueenType.class);
      return t == null ? null : new Type(t.name(), t.version());
    }
  };

  private final Map<Class<?>, Type> registered;
  private final Map<String, PayloadUpcaster> upcasters;
  /** Per type name: the newest version a registration or an upcaster names. */
  private final Map<String, Integer> newest;

  private PayloadTypes(Builder b) {
    this.registered = Map.copyOf(b.registered);
    this.upcasters = Map.copyOf(b.upcasters);
    Map<String, Integer> n = new HashMap<>();
    for (Type t : b.registered.values()) {
      n.merge(t.name(), t.version(), Math::max);
    }
    for (String key : b.upcasters.keySet()) {
      int at = key.indexOf('\u0000');
      n.merge(key.substring(0, at), Integer.parseInt(key.substring(at + 1)) + 1, Math::max);
    }
    this.newest = Map.copyOf(n);
  }

  public static Builder builder() {
    return new Builder();
  }

  /**
   * The type of a payload class: its registration, else its {@link QueenType} annotation, else {@code null}
   * (an untyped payload: nothing is stored or checked).
   */
  public Type typeOf(Class<?> c) {
    if (c == null) {
      return null;
    }
    Type t = registered.isEmpty() ? null : registered.get(c);
    return t != null ? t : ANNOTATED.get(c);
  }

  /**
   * The newest schema version of type {@code name} this node knows without a class in hand: the highest of the
   * versions registered for that name ({@link Builder#register}, the builder's {@code payloadType}) and of the
   * versions its upcasters lead to ({@code from + 1}); 0 when neither names it. A {@link QueenType} annotation is
   * not seen here: it is read from the class a consumer passes to {@link Message#payload(Class)}. A reader without
   * a class (a Postgres sink) reads a typed payload at this version, through {@link #readable}.
   */
  public int newestVersion(String name) {
    if (name == null) {
      return 0;
    }
    Integer v = newest.get(name);
    return v == null ? 0 : v;
  }

  /** The upcaster from {@code fromVersion} to {@code fromVersion + 1} of a type, or {@code null}. */
  public PayloadUpcaster upcaster(String type, int fromVersion) {
    return upcasters.isEmpty() ? null : upcasters.get(type + '\u0000' + fromVersion);
  }

  /**
   * The payload of a message of {@code stored} type and version as the class {@code target} reads it: the
   * stored JSON itself when the versions match, or the result of the upcaster chain for an older version.
   *
   * @param what names the message in an error (never its payload)
   * @throws PayloadTypeException for another type, a newer version, a missing upcaster or a failing one
   */
  public JsonNode readable(JsonNode payload, String storedType, int storedVersion, Type target, String what) {
    if (!target.name().equals(storedType)) {
      throw new PayloadTypeException(PayloadTypeException.Reason.OTHER_TYPE, storedType, storedVersion, target.name(),
          target.version(), what + " is of type '" + storedType + "' version " + storedVersion + ", not '" + target.name()
          + "': read it with a class of that type, or with payload() as JSON");
    }
    if (storedVersion == target.version()) {
      return payload;
    }
    if (storedVersion > target.version()) {
      throw new PayloadTypeException(PayloadTypeException.Reason.NEWER_VERSION, storedType, storedVersion, target.name(),
          target.version(), what + " is '" + storedType + "' version " + storedVersion + ", newer than version "
          + target.version() + " this consumer understands: deploy consumers that understand version " + storedVersion
          + " before producers write it (it follows the queue's retry and dead-letter rules; redrive it after the upgrade)");
    }
    JsonNode p = payload.deepCopy();
    for (int v = storedVersion; v < target.version(); v++) {
      PayloadUpcaster u = upcaster(storedType, v);
      if (u == null) {
        throw new PayloadTypeException(PayloadTypeException.Reason.NO_UPCASTER, storedType, storedVersion, target.name(),
            target.version(), what + " is '" + storedType + "' version " + storedVersion + " and this consumer reads version "
            + target.version() + ", but no upcaster from version " + v + " to " + (v + 1) + " is registered: add"
            + " upcaster(\"" + storedType + "\", " + v + ", ...) to the builder");
      }
      try {
        p = Objects.requireNonNull(u.upcast(p), "the upcaster returned null");
      } catch (RuntimeException e) {
        // the cause's message may quote the payload: name its class only
        throw new PayloadTypeException(PayloadTypeException.Reason.UPCASTER_FAILED, storedType, storedVersion,
            target.name(), target.version(), what + ": the upcaster of '" + storedType + "' from version " + v + " to "
            + (v + 1) + " failed: " + e.getClass().getName());
      }
    }
    return p;
  }

  /** Collects registrations; {@link #build()} checks them. Not thread-safe. */
  public static final class Builder {
    private final Map<Class<?>, Type> registered = new HashMap<>();
    private final Map<String, PayloadUpcaster> upcasters = new HashMap<>();

    private Builder() {}

    /**
     * Registers {@code type} as type {@code name} in schema {@code version} (wins over a {@link QueenType}
     * annotation on the class).
     *
     * @throws IllegalArgumentException for an invalid name or version, or a class registered twice differently
     */
    public Builder register(Class<?> type, String name, int version) {
      Objects.requireNonNull(type, "type must not be null");
      Type t = new Type(name, version);
      Type before = registered.putIfAbsent(type, t);
      if (before != null && !before.equals(t)) {
        throw new IllegalArgumentException("payload class " + type.getName() + " is registered twice: as '"
            + before.name() + "' version " + before.version() + " and as '" + name + "' version " + version);
      }
      return this;
    }

    /**
     * Registers the upcaster of type {@code name} from {@code fromVersion} to {@code fromVersion + 1}.
     *
     * @throws IllegalArgumentException for an invalid name or version, or a second upcaster for the same step
     */
    public Builder upcaster(String name, int fromVersion, PayloadUpcaster upcaster) {
      Objects.requireNonNull(upcaster, "upcaster must not be null");
      new Type(name, fromVersion);
      if (upcasters.putIfAbsent(name + '\u0000' + fromVersion, upcaster) != null) {
        throw new IllegalArgumentException("payload type '" + name + "' has two upcasters from version " + fromVersion);
      }
      return this;
    }

    public PayloadTypes build() {
      return new PayloadTypes(this);
    }
  }
}
