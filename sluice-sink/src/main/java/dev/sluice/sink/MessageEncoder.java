package dev.sluice.sink;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.Fence;
import java.util.List;
import java.util.function.Predicate;

/**
 * Turns changes into messages: applies the filter, the {@link Publication} mode and writes the
 * {@link Envelope}. Shared by every sink; thread-safe.
 *
 * @param <D> the backend's document type
 */
public interface MessageEncoder<D> {

  /**
   * The messages to publish for {@code event}, in order; empty if the filter skips it or (in
   * domain-event mode) it carries no event.
   *
   * @throws MessageEncodingException naming the change and its position if it cannot be encoded
   */
  List<OutboundMessage<D>> encode(ChangeEvent<D> event, Fence fence);

  /**
   * In domain-event mode with {@link Publication.MissingEvent#COUNT}: how many inserts, replaces
   * and updates carried no event and published nothing since this encoder was built; 0 otherwise.
   */
  default long changesWithoutEvent() {
    return 0;
  }

  static <D> Builder<D> builder(DocumentMapper<D> mapper) {
    return new Builder<>(mapper);
  }

  /** Builder; defaults: publish every change as a change message. */
  final class Builder<D> {
    private final DocumentMapper<D> mapper;
    private Publication publication = Publication.changes();
    private Predicate<? super ChangeEvent<D>> filter = e -> true;

    private Builder(DocumentMapper<D> mapper) {
      this.mapper = ConfigurationException.requireNonNull(mapper, "mapper");
    }

    public Builder<D> publication(Publication publication) {
      this.publication = ConfigurationException.requireNonNull(publication, "publication");
      return this;
    }

    /**
     * Only changes for which {@code filter} is true are published; the others are skipped (and
     * still checkpointed), for example data migrations marked by a field.
     */
    public Builder<D> filter(Predicate<? super ChangeEvent<D>> filter) {
      this.filter = ConfigurationException.requireNonNull(filter, "filter");
      return this;
    }

    public MessageEncoder<D> build() {
      return new EnvelopeEncoder<>(mapper, publication, filter);
    }
  }
}
