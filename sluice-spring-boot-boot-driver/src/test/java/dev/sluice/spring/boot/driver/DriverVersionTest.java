package dev.sluice.spring.boot.driver;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoClient;
import org.junit.jupiter.api.Test;

/**
 * The starter's tests in this module run on the driver Spring Boot's dependency management chooses,
 * not on the one Sluice is built with: this fails if the class path says otherwise, so the module
 * cannot pass on the wrong driver without anyone noticing.
 */
class DriverVersionTest {

  @Test
  void theStartersTestsRunOnTheDriverSpringBootManages() {
    String expected = System.getProperty("sluice.expected.driver.version");
    assertThat(expected).as("the version the build asks for").isNotBlank();
    assertThat(com.mongodb.internal.build.MongoDriverVersion.VERSION).as("the driver's own version").isEqualTo(expected);
    assertThat(jarOf(MongoClient.class)).as("mongodb-driver-sync on the test class path")
        .isEqualTo("mongodb-driver-sync-" + expected + ".jar");
    assertThat(jarOf(org.bson.BsonDocument.class)).as("bson on the test class path")
        .isEqualTo("bson-" + expected + ".jar");
  }

  private static String jarOf(Class<?> type) {
    String path = type.getProtectionDomain().getCodeSource().getLocation().getPath();
    return path.substring(path.lastIndexOf('/') + 1);
  }
}
