package io.queen.embedded.internal.config;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.queen.PayloadTypes;

/**
 * How payloads are read and written: the ObjectMapper, the largest payload a push accepts, the byte ceiling of one KV
 * prefix read, and the registered payload types with their upcasters.
 */
public record PayloadConfig(ObjectMapper mapper, int maxPayloadBytes, long kvMaxReadBytes, PayloadTypes payloadTypes) {}
