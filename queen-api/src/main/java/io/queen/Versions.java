package io.queen;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** Reads Queen's version once (see {@link Queen#version()}). */
final class Versions {
  static final String VERSION = read();

  private Versions() {}

  private static String read() {
    String v = Queen.class.getPackage() == null ? null : Queen.class.getPackage().getImplementationVersion();
    if (v != null && !v.isBlank()) {
      return v;
    }
    try (InputStream in = Queen.class.getResourceAsStream("version.properties")) {
      if (in != null) {
        Properties p = new Properties();
        p.load(in);
        String fromBuild = p.getProperty("version");
        if (fromBuild != null && !fromBuild.isBlank() && !fromBuild.startsWith("${")) {
          return fromBuild;
        }
      }
    } catch (IOException e) {
      // fall through: a missing version must not stop anything
    }
    return "unknown";
  }
}
