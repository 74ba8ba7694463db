package dev.sluice.mongodb.view;

import dev.sluice.ConfigurationException;
import java.util.List;

/**
 * A many-to-one join of a {@link JoinView}: the root document's {@code localField} holds the
 * {@code _id} of a document of {@code collection}; its {@code fields} are embedded under {@code
 * as} (or {@code as: null} when the root's key is null or the joined document does not exist yet).
 */
public record Lookup(String collection, String localField, String as, List<String> fields) {
  public Lookup {
    ViewNames.collection(collection, "lookup.collection");
    ViewNames.field(localField, "lookup.localField");
    ViewNames.field(as, "lookup.as");
    ConfigurationException.requireNonNull(fields, "lookup.fields");
    ConfigurationException.require(!fields.isEmpty(), "lookup.fields", fields, "must not be empty");
    fields.forEach(f -> ViewNames.field(f, "lookup.fields"));
    fields = List.copyOf(fields);
  }
}
