package dev.sluice.feed;

/**
 * What {@link ChangeEvent#document()} holds, so that nobody mistakes a later state for the
 * change's own.
 */
public enum DocumentState {
  /**
   * The document as this change left it: an insert's or replacement's document, an update's
   * post-image (MongoDB {@code fullDocument: required / whenAvailable} with
   * {@code changeStreamPreAndPostImages}), a SQL row after the change, a snapshot read.
   */
  AFTER_CHANGE,
  /**
   * The document as it was when the change was read (MongoDB {@code fullDocument: updateLookup}):
   * it may already include later changes, and is {@code null} once the document was deleted.
   * What this change itself did is in {@link ChangeEvent#changedFields()}.
   */
  CURRENT,
  /** No document: a delete, or a feed that does not return documents for this operation. */
  NONE
}
