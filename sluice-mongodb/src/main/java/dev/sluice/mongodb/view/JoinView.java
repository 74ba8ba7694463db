package dev.sluice.mongodb.view;

import dev.sluice.ConfigurationException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * One target document per document of {@code root}, with the same {@code _id}: the root's {@code
 * fields} plus, for each {@link Lookup}, the referenced document's fields embedded under its
 * {@code as} name.
 *
 * <pre>{@code
 * JoinView orderView = ViewDefinition.join("order_view")
 *     .root("orders", "customerId", "amount")
 *     .lookup("customers", "customerId", "customer", "name", "tier")
 *     .build();
 * // order_view: {_id: o1, customerId: c1, amount: 30, customer: {name: "Ada", tier: "gold"}}
 * }</pre>
 */
public record JoinView(
    String target, String root, List<String> fields, List<Lookup> lookups, String versionField)
    implements ViewDefinition {

  public JoinView {
    ViewNames.collection(target, "target");
    ViewNames.collection(root, "root");
    ConfigurationException.requireNonNull(fields, "fields");
    fields.forEach(f -> ViewNames.field(f, "fields"));
    ConfigurationException.requireNonNull(lookups, "lookups");
    ViewNames.field(versionField, "versionField");
    Set<String> names = new HashSet<>(fields);
    Set<String> collections = new HashSet<>(Set.of(root, target));
    for (Lookup l : lookups) {
      ConfigurationException.require(
          names.add(l.as()), "lookup.as", "'" + l.as() + "'", "must differ from every other field");
      ConfigurationException.require(
          collections.add(l.collection()),
          "lookup.collection",
          "'" + l.collection() + "'",
          "must differ from the root, the target and the other lookups");
    }
    fields = List.copyOf(fields);
    lookups = List.copyOf(lookups);
  }

  @Override
  public List<String> sources() {
    List<String> sources = new ArrayList<>();
    sources.add(root);
    lookups.forEach(l -> sources.add(l.collection()));
    return List.copyOf(sources);
  }

  /** The target's fields that the view owns: the root fields and every lookup's {@code as}. */
  List<String> managedFields() {
    List<String> managed = new ArrayList<>(fields);
    lookups.forEach(l -> managed.add(l.as()));
    return managed;
  }

  /** Builder; every method validates and throws {@link ConfigurationException} naming the value. */
  public static final class Builder {
    private final String target;
    private String root;
    private List<String> fields = List.of();
    private final List<Lookup> lookups = new ArrayList<>();
    private String versionField = "version";

    Builder(String target) {
      this.target = ViewNames.collection(target, "target");
    }

    /** The root collection and which of its fields the target carries. */
    public Builder root(String collection, String... fields) {
      this.root = ViewNames.collection(collection, "root");
      this.fields = ViewNames.fields(fields, "fields");
      return this;
    }

    /** Embeds {@code fields} of the {@code collection} document whose _id is in {@code localField}. */
    public Builder lookup(String collection, String localField, String as, String... fields) {
      lookups.add(new Lookup(collection, localField, as, List.of(fields)));
      return this;
    }

    /** The version field of every source document; default {@code version}. */
    public Builder versionField(String versionField) {
      this.versionField = ViewNames.field(versionField, "versionField");
      return this;
    }

    public JoinView build() {
      if (root == null) {
        throw new ConfigurationException("root must be set for view '" + target + "'");
      }
      return new JoinView(target, root, fields, lookups, versionField);
    }
  }
}
