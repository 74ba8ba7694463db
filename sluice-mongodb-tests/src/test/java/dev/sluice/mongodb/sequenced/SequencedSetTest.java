package dev.sluice.mongodb.sequenced;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import dev.sluice.ConfigurationException;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.util.List;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class SequencedSetTest {
  @RegisterExtension static final EmbeddedMongoExtension mongo = new EmbeddedMongoExtension();
  private MongoCollection<BsonDocument> students;
  private SequencedSet classes;
  private final BsonValue john = new BsonInt32(1);

  @BeforeEach
  void setUp() {
    students = mongo.freshDatabase().getCollection("students", BsonDocument.class);
    classes = SequencedSet.of(students, "classes");
  }

  @Test
  void insertThenDeleteInOrder() {
    assertThat(classes.add(john, "CS 101", 1001)).isEqualTo(Outcome.APPLIED);
    assertThat(classes.members(john)).containsExactly("CS 101");
    assertThat(classes.remove(john, "CS 101", 1002)).isEqualTo(Outcome.APPLIED);
    assertThat(classes.members(john)).isEmpty();
  }

  @Test
  void deleteArrivingBeforeItsInsertWins() {
    assertThat(classes.remove(john, "CS 101", 1002)).isEqualTo(Outcome.APPLIED);
    assertThat(classes.add(john, "CS 101", 1001)).isEqualTo(Outcome.SUPERSEDED);
    assertThat(classes.members(john)).isEmpty();
  }

  /** The seed's hard case: add 1, remove 2, add 3 arriving as 1, 3, 2 must end enrolled. */
  @Test
  void addRemoveAddArrivingAsOneThreeTwoEndsPresent() {
    assertThat(classes.add(john, "CS 101", 1)).isEqualTo(Outcome.APPLIED);
    assertThat(classes.add(john, "CS 101", 3)).isEqualTo(Outcome.APPLIED);
    assertThat(classes.remove(john, "CS 101", 2)).isEqualTo(Outcome.SUPERSEDED);
    assertThat(classes.members(john)).containsExactly("CS 101");
  }

  @Test
  void everyArrivalOrderOfAddRemoveAddEndsPresent() {
    List<List<Integer>> orders =
        List.of(
            List.of(1, 2, 3), List.of(1, 3, 2), List.of(2, 1, 3),
            List.of(2, 3, 1), List.of(3, 1, 2), List.of(3, 2, 1));
    int doc = 100;
    for (List<Integer> order : orders) {
      BsonValue id = new BsonInt32(doc++);
      for (int seq : order) {
        if (seq == 2) {
          classes.remove(id, "CS 101", seq);
        } else {
          classes.add(id, "CS 101", seq);
        }
      }
      assertThat(classes.members(id)).as("arrival order %s", order).containsExactly("CS 101");
    }
  }

  @Test
  void duplicatesAreSupersededAndChangeNothing() {
    classes.add(john, "CS 101", 5);
    classes.add(john, "MATH 2", 6);
    BsonDocument before = students.find(Filters.eq("_id", john)).first();
    assertThat(classes.add(john, "CS 101", 5)).isEqualTo(Outcome.SUPERSEDED);
    assertThat(classes.add(john, "MATH 2", 6)).isEqualTo(Outcome.SUPERSEDED);
    assertThat(students.find(Filters.eq("_id", john)).first()).isEqualTo(before);
  }

  @Test
  void membersAreIndependentAndSurviveOtherFields() {
    students.insertOne(new BsonDocument("_id", john).append("name", new BsonString("John Doe")));
    classes.add(john, "CS 101", 1);
    classes.add(john, "ART 1", 2);
    classes.remove(john, "CS 101", 3);
    assertThat(classes.members(john)).containsExactly("ART 1");
    assertThat(students.find(Filters.eq("_id", john)).first().getString("name").getValue())
        .isEqualTo("John Doe");
  }

  @Test
  void memberNamesWithDotsDollarsAndPercentsRoundTrip() {
    List<String> names = List.of("a.b", "$set", "50%", "%2E", "x.y.$z");
    long seq = 1;
    for (String name : names) {
      assertThat(classes.add(john, name, seq++)).isEqualTo(Outcome.APPLIED);
    }
    assertThat(classes.members(john)).containsExactlyInAnyOrderElementsOf(names);
    assertThat(classes.remove(john, "a.b", seq)).isEqualTo(Outcome.APPLIED);
    assertThat(classes.members(john)).doesNotContain("a.b").contains("%2E");
  }

  @Test
  void pruneRemovesOnlyTombstonesAtOrBelowTheHorizon() {
    classes.add(john, "keep-present", 1);
    classes.add(john, "old-gone", 2);
    classes.remove(john, "old-gone", 3);
    classes.add(john, "new-gone", 4);
    classes.remove(john, "new-gone", 10);

    assertThat(classes.pruneTombstones(john, 5)).isEqualTo(1);

    BsonDocument map = students.find(Filters.eq("_id", john)).first().getDocument("classes");
    assertThat(map.keySet()).containsExactlyInAnyOrder("keep-present", "new-gone");
    assertThat(classes.members(john)).containsExactly("keep-present");
    // The tombstone above the horizon still rejects a late add below it.
    assertThat(classes.add(john, "new-gone", 9)).isEqualTo(Outcome.SUPERSEDED);
    // Collection-wide pruning reaches it once the horizon passes it.
    assertThat(classes.pruneTombstones(10)).isEqualTo(1);
    assertThat(students.find(Filters.eq("_id", john)).first().getDocument("classes").keySet())
        .containsExactly("keep-present");
  }

  @Test
  void pruneNeverRemovesAnOperationAppliedAfterTheTombstoneWasRead() {
    classes.remove(john, "CS 101", 3);
    BsonDocument staleRead = students.find(Filters.eq("_id", john)).first();
    classes.add(john, "CS 101", 4); // lands between the read and the conditional unset
    // Drive the conditional step with the stale read: it must not match.
    assertThat(((MongoSequencedSet) classes).prune(staleRead, 100)).isZero();
    assertThat(classes.members(john)).containsExactly("CS 101");
  }

  @Test
  void badConfigurationAndInputAreRejectedByName() {
    assertThatThrownBy(() -> SequencedSet.of(students, "a.b"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("field");
    assertThatThrownBy(() -> SequencedSet.of(students, "_id"))
        .isInstanceOf(ConfigurationException.class);
    assertThatThrownBy(() -> SequencedSet.of(null, "x"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("collection");
    assertThatThrownBy(() -> classes.add(john, "", 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("member");
  }

  @Test
  void scalarValueIsLastWriterWinsBySequence() {
    SequencedValue email = SequencedValue.of(students, "email");
    assertThat(email.get(john)).isEmpty();
    assertThat(email.set(john, new BsonString("b@x"), 7)).isEqualTo(Outcome.APPLIED);
    assertThat(email.set(john, new BsonString("a@x"), 5)).isEqualTo(Outcome.SUPERSEDED);
    assertThat(email.set(john, new BsonString("b@x"), 7)).isEqualTo(Outcome.SUPERSEDED);
    assertThat(email.get(john)).contains(new BsonString("b@x"));
    assertThat(email.sequence(john)).contains(7L);
    assertThat(email.set(john, new BsonString("c@x"), 8)).isEqualTo(Outcome.APPLIED);
    assertThat(email.get(john)).contains(new BsonString("c@x"));
  }
}
