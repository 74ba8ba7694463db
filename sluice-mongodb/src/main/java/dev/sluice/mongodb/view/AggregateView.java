package dev.sluice.mongodb.view;

import dev.sluice.ConfigurationException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * One target document per group: {@code _id} is the group key (the {@code _id} of the owner
 * document), with the owner's {@code ownerFields}, the number of member documents whose {@code
 * groupField} holds the key ({@code countField}) and the sum of their {@code sumOf} field ({@code
 * sumField}, optional). A group exists while its owner exists or at least one member points at it.
 *
 * <pre>{@code
 * AggregateView stats = ViewDefinition.aggregate("customer_stats")
 *     .owner("customers", "name", "tier")
 *     .members("orders", "customerId")
 *     .count("orderCount")
 *     .sum("amount", "orderTotal")
 *     .build();
 * // customer_stats: {_id: c1, name: "Ada", tier: "gold", orderCount: 2, orderTotal: 70}
 * }</pre>
 */
public record AggregateView(
    String target,
    String owner,
    List<String> ownerFields,
    String members,
    String groupField,
    String countField,
    String sumOf,
    String sumField,
    String versionField)
    implements ViewDefinition {

  public AggregateView {
    ViewNames.collection(target, "target");
    ViewNames.collection(owner, "owner");
    ViewNames.collection(members, "members");
    ConfigurationException.require(
        new HashSet<>(List.of(target, owner, members)).size() == 3,
        "members",
        "'" + members + "'",
        "must differ from the owner '" + owner + "' and the target '" + target + "'");
    ConfigurationException.requireNonNull(ownerFields, "ownerFields");
    ownerFields.forEach(f -> ViewNames.field(f, "ownerFields"));
    ViewNames.field(groupField, "groupField");
    ViewNames.field(countField, "countField");
    ConfigurationException.require(
        (sumOf == null) == (sumField == null),
        "sumField",
        sumField,
        "must be set together with sumOf (" + sumOf + ")");
    if (sumOf != null) {
      ViewNames.field(sumOf, "sumOf");
      ViewNames.field(sumField, "sumField");
    }
    ViewNames.field(versionField, "versionField");
    Set<String> names = new HashSet<>(ownerFields);
    ConfigurationException.require(
        names.add(countField), "countField", "'" + countField + "'", "must differ from the owner fields");
    if (sumField != null) {
      ConfigurationException.require(
          names.add(sumField), "sumField", "'" + sumField + "'", "must differ from the other fields");
    }
    ownerFields = List.copyOf(ownerFields);
  }

  @Override
  public List<String> sources() {
    return List.of(owner, members);
  }

  List<String> managedFields() {
    List<String> managed = new ArrayList<>(ownerFields);
    managed.add(countField);
    if (sumField != null) {
      managed.add(sumField);
    }
    return managed;
  }

  /** Builder; every method validates and throws {@link ConfigurationException} naming the value. */
  public static final class Builder {
    private final String target;
    private String owner;
    private List<String> ownerFields = List.of();
    private String members;
    private String groupField;
    private String countField = "count";
    private String sumOf;
    private String sumField;
    private String versionField = "version";

    Builder(String target) {
      this.target = ViewNames.collection(target, "target");
    }

    /** The collection whose {@code _id}s are the group keys, and the fields copied from it. */
    public Builder owner(String collection, String... fields) {
      this.owner = ViewNames.collection(collection, "owner");
      this.ownerFields = ViewNames.fields(fields, "ownerFields");
      return this;
    }

    /** The collection of members and the field holding their group key. */
    public Builder members(String collection, String groupField) {
      this.members = ViewNames.collection(collection, "members");
      this.groupField = ViewNames.field(groupField, "groupField");
      return this;
    }

    /** The target field holding the member count; default {@code count}. */
    public Builder count(String countField) {
      this.countField = ViewNames.field(countField, "countField");
      return this;
    }

    /** Sums the members' {@code field} (a number) into the target's {@code into}. */
    public Builder sum(String field, String into) {
      this.sumOf = ViewNames.field(field, "sumOf");
      this.sumField = ViewNames.field(into, "sumField");
      return this;
    }

    public Builder versionField(String versionField) {
      this.versionField = ViewNames.field(versionField, "versionField");
      return this;
    }

    public AggregateView build() {
      if (owner == null) {
        throw new ConfigurationException("owner must be set for view '" + target + "'");
      }
      if (members == null) {
        throw new ConfigurationException("members must be set for view '" + target + "'");
      }
      return new AggregateView(
          target, owner, ownerFields, members, groupField, countField, sumOf, sumField, versionField);
    }
  }
}
