package dev.sluice.sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.SluiceException;
import java.io.IOException;
import java.time.Instant;
import java.util.Objects;

/**
 * The JSON envelope every Sluice sink publishes, version {@value #VERSION}, as read by a
 * consumer. The format is documented in {@code docs/messaging.md}; fields are only ever added
 * within a version, so readers must ignore fields they do not know.
 *
 * <pre>{@code
 * {"envelope": "sluice/1", "kind": "change" | "event", "id": "...", "changeId": "...",
 *  "stream": "shop.orders", "key": "...", "operation": "UPDATE",
 *  "position": "<opaque token>", "sourceTime": "2026-01-01T00:00:00Z" | null,
 *  "fence": {"lease": "shop.orders#0", "epoch": 7},
 *  "documentKey": {...} | null, "document": {...} | null,   // kind = change
 *  "documentState": "AFTER_CHANGE" | "CURRENT" | "NONE",    // kind = change
 *  "changedFields": {...},                                  // kind = change, updates that report it
 *  "before": {...},                                         // kind = change, with pre-images
 *  "event": {...}}                                          // kind = event
 * }</pre>
 *
 * @param version the envelope version, {@value #VERSION}
 * @param kind {@code change} or {@code event}
 * @param id the message id to de-duplicate on
 * @param changeId the id of the change the message was made from
 * @param stream the source stream
 * @param key the document key
 * @param operation the change's operation name
 * @param position the source position token
 * @param sourceTime the source commit time (MongoDB cluster time), or null
 * @param fenceEpoch the publishing listener's epoch (0 for replays)
 * @param documentKey the document key as JSON, or null
 * @param document the document the feed returned (kind change), or null; which state it is says
 *     {@code documentState}
 * @param event the domain event (kind event), or null
 * @param documentState kind change: {@code AFTER_CHANGE} (the document as this change left it),
 *     {@code CURRENT} (looked up when the change was read: may include later changes, null once
 *     deleted) or {@code NONE}; null for events and for envelopes written before it was added
 * @param changedFields kind change, updates: the fields this change set, by dotted path, or null
 * @param before kind change: the document before the change (a pre-image, MongoDB
 *     {@code fullDocumentBeforeChange}) when the feed was asked for it and had it, else null
 */
public record Envelope(
    int version,
    String kind,
    String id,
    String changeId,
    String stream,
    String key,
    String operation,
    String position,
    Instant sourceTime,
    long fenceEpoch,
    JsonNode documentKey,
    JsonNode document,
    JsonNode event,
    String documentState,
    JsonNode changedFields,
    JsonNode before) {

  /** The current envelope version. */
  public static final int VERSION = 1;

  /** Value of the {@code envelope} field for this version. */
  public static final String VERSION_TAG = "sluice/" + VERSION;

  /** Header: the message id (change id or domain event id). */
  public static final String HEADER_ID = "sluice-id";
  /** Header: the id of the source change. */
  public static final String HEADER_CHANGE_ID = "sluice-change-id";
  /** Header: the operation (INSERT, UPDATE, ...). */
  public static final String HEADER_OPERATION = "sluice-operation";
  /** Header: the source position token. */
  public static final String HEADER_POSITION = "sluice-position";
  /** Header: the source commit time (MongoDB cluster time), ISO-8601; absent when unknown. */
  public static final String HEADER_CLUSTER_TIME = "sluice-cluster-time";
  /** Header: the fence epoch of the publishing listener. */
  public static final String HEADER_FENCE_EPOCH = "sluice-fence-epoch";
  /** Header: the source stream. */
  public static final String HEADER_STREAM = "sluice-stream";
  /** Header: the message kind, {@code change} or {@code event}. */
  public static final String HEADER_KIND = "sluice-kind";
  /** Header: the envelope version tag, {@value #VERSION_TAG}. */
  public static final String HEADER_ENVELOPE = "sluice-envelope";

  private static final ObjectMapper JSON = new ObjectMapper();

  public Envelope {
    Objects.requireNonNull(kind, "kind");
    Objects.requireNonNull(id, "id");
  }

  /**
   * Reads an envelope.
   *
   * @throws SluiceException if the body is not JSON, is not a Sluice envelope, or has a
   *     version this reader does not know
   */
  public static Envelope parse(byte[] body) {
    JsonNode root;
    try {
      root = JSON.readTree(body);
    } catch (IOException e) {
      throw new SluiceException("Message body is not JSON: " + e.getMessage(), e);
    }
    if (root == null || !root.isObject() || !root.path("envelope").isTextual()) {
      throw new SluiceException("Message body is not a Sluice envelope: no \"envelope\" field");
    }
    String tag = root.get("envelope").asText();
    if (!VERSION_TAG.equals(tag)) {
      throw new SluiceException(
          "Unsupported envelope version '" + tag + "'; this reader understands " + VERSION_TAG);
    }
    String time = text(root, "sourceTime");
    return new Envelope(
        VERSION,
        text(root, "kind"),
        text(root, "id"),
        text(root, "changeId"),
        text(root, "stream"),
        text(root, "key"),
        text(root, "operation"),
        text(root, "position"),
        time == null ? null : Instant.parse(time),
        root.path("fence").path("epoch").asLong(),
        node(root, "documentKey"),
        node(root, "document"),
        node(root, "event"),
        text(root, "documentState"),
        node(root, "changedFields"),
        node(root, "before"));
  }

  private static String text(JsonNode root, String field) {
    JsonNode n = root.get(field);
    return n == null || n.isNull() ? null : n.asText();
  }

  private static JsonNode node(JsonNode root, String field) {
    JsonNode n = root.get(field);
    return n == null || n.isNull() ? null : n;
  }
}
