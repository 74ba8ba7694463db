package dev.sluice.demo.enrolment;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The seed's message format, and the error a consumer reports for a malformed message. */
class EnrolmentMessageTest {
  private final ObjectMapper json = new ObjectMapper();

  @Test
  void readsTheSeedsMessageFormat() throws Exception {
    EnrolmentMessage m = json.readValue(
        "{\"operation\": \"enrol\", \"student_id\": 1, \"class\": \"CS 101\", \"sequence_number\": 1000}",
        EnrolmentMessage.class);

    assertThat(m).isEqualTo(new EnrolmentMessage("enrol", 1, "CS 101", 1000));
    assertThat(m.enrol()).isTrue();
    assertThat(json.readValue(json.writeValueAsBytes(m), EnrolmentMessage.class)).isEqualTo(m);
  }

  @Test
  void aMalformedMessageIsRejectedNamingTheField() {
    assertThatThrownBy(() -> json.readValue(
            "{\"operation\": \"enroll\", \"student_id\": 1, \"class\": \"CS 101\", \"sequence_number\": 7}",
            EnrolmentMessage.class))
        .hasMessageContaining("operation must be 'enrol' or 'unenrol', got enroll");
    assertThatThrownBy(() -> json.readValue(
            "{\"operation\": \"unenrol\", \"student_id\": 1, \"class\": \"CS 101\", \"sequence_number\": 0}",
            EnrolmentMessage.class))
        .hasMessageContaining("sequence_number must be positive");
  }

  @Test
  void theReferenceAppliesMessagesInSequenceOrderWhateverTheListOrder() {
    // add 1 / remove 2 / add 3, listed as 1, 3, 2: sequence order leaves the class enrolled
    List<EnrolmentMessage> history = List.of(
        new EnrolmentMessage("enrol", 1, "CS 101", 1),
        new EnrolmentMessage("enrol", 1, "CS 101", 3),
        new EnrolmentMessage("unenrol", 1, "CS 101", 2),
        new EnrolmentMessage("unenrol", 2, "MATH 201", 5),
        new EnrolmentMessage("enrol", 2, "MATH 201", 4));

    assertThat(EnrolmentDemo.inSequenceOrder(history).get(1)).containsExactly("CS 101");
    assertThat(EnrolmentDemo.inSequenceOrder(history).get(2)).isEmpty();
  }
}
