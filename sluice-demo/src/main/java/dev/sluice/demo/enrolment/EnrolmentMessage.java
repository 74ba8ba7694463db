package dev.sluice.demo.enrolment;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.Objects;

/**
 * Seed 003's queue message: a student enrols in or leaves a class, stamped by the web
 * application with an ever-increasing sequence number, for example {@code {"operation": "enrol",
 * "student_id": 1, "class": "CS 101", "sequence_number": 1000}}.
 */
record EnrolmentMessage(
    @JsonProperty("operation") String operation,
    @JsonProperty("student_id") int studentId,
    @JsonProperty("class") String className,
    @JsonProperty("sequence_number") long sequenceNumber) {
  static final String ENROL = "enrol";
  static final String UNENROL = "unenrol";

  EnrolmentMessage {
    if (!ENROL.equals(operation) && !UNENROL.equals(operation)) {
      throw new IllegalArgumentException("operation must be 'enrol' or 'unenrol', got " + operation);
    }
    Objects.requireNonNull(className, "class");
    if (sequenceNumber < 1) {
      throw new IllegalArgumentException("sequence_number must be positive, got " + sequenceNumber);
    }
  }

  boolean enrol() {
    return ENROL.equals(operation);
  }
}
