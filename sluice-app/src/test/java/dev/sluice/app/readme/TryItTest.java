package dev.sluice.app.readme;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The README's "Try it in five minutes" program, {@link TryIt}, compiles and does what the README
 * says (the three inserted orders reach the handler, in order), and the README shows it verbatim.
 */
class TryItTest {
  @Test
  void theReadmeProgramPrintsTheThreeInsertsInOrder() throws Exception {
    PrintStream original = System.out;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      TryIt.main(new String[0]);
    } finally {
      System.setOut(original);
    }
    List<String> lines = Arrays.asList(captured.toString(StandardCharsets.UTF_8).split("\\R"));
    original.println(String.join("\n", lines));

    List<String> changes = lines.stream().filter(l -> l.startsWith("INSERT ")).toList();
    assertThat(changes).hasSize(3);
    for (int i = 1; i <= 3; i++) {
      assertThat(changes.get(i - 1))
          .contains("\"_id\": \"order-" + i + "\"")
          .contains("\"amount\": " + (10 * i))
          .contains("lease try-it/shop.orders#0of1");
    }
    assertThat(lines).contains("all changes arrived");
  }

  @Test
  void theReadmeShowsTheProgramVerbatim() throws Exception {
    String program = Files.readString(Path.of("src/test/java/dev/sluice/app/readme/TryIt.java"));
    assertThat(Files.readString(Path.of("../README.md")))
        .as("README.md, section \"Try it in five minutes\": copy TryIt.java there unchanged")
        .contains("```java\n" + program + "```\n");
  }
}
