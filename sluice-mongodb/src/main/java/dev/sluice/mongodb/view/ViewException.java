package dev.sluice.mongodb.view;

import dev.sluice.SluiceException;
import org.bson.BsonValue;

/**
 * A view could not be maintained from a source document: a declared key or version field is
 * missing or has the wrong type. The message names the view, the collection, the {@code _id} and
 * the field.
 */
public class ViewException extends SluiceException {
  private static final long serialVersionUID = 1L;

  public ViewException(String message) {
    super(message);
  }

  static ViewException missingField(
      String view, String collection, BsonValue id, String field, String role) {
    return new ViewException(document(view, collection, id) + " has no field '" + field + "' (declared as the "
        + role + ")");
  }

  static ViewException wrongType(
      String view, String collection, BsonValue id, String field, String role, BsonValue value) {
    return new ViewException(document(view, collection, id) + " has field '" + field + "' (the " + role
        + ") of type " + value.getBsonType() + ", expected a number");
  }

  private static String document(String view, String collection, BsonValue id) {
    return "View '" + view + "': document " + collection + "/_id=" + render(id);
  }

  static String render(BsonValue id) {
    if (id == null) {
      return "null";
    }
    return id.isString() ? id.asString().getValue() : id.toString();
  }
}
