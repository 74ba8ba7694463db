package dev.sluice;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** Every decision record is listed in the ADR index, {@code docs/adr/README.md}, and every link there resolves. */
class AdrIndexTest {

  @Test
  void everyRecordIsInTheIndexAndEveryEntryExists() throws IOException {
    Path adr = adrDirectory();
    String index = Files.readString(adr.resolve("README.md"));
    List<String> records;
    try (Stream<Path> files = Files.list(adr)) {
      records = files.map(p -> p.getFileName().toString()).filter(n -> n.matches("\\d{4}-.*\\.md")).sorted().toList();
    }
    assertThat(records).isNotEmpty();
    assertThat(records).as("records missing from docs/adr/README.md").allSatisfy(r -> assertThat(index).contains("(" + r + ")"));
    java.util.regex.Matcher links = java.util.regex.Pattern.compile("\\]\\((\\d{4}-[^)]+\\.md)\\)").matcher(index);
    while (links.find()) {
      assertThat(adr.resolve(links.group(1))).as("index entry " + links.group(1)).exists();
    }
  }

  /** Every record says whether it holds ({@code Status:} near its top, or a {@code ## Status} section), and so does its row. */
  @Test
  void everyRecordAndItsRowStateAStatus() throws IOException {
    Path adr = adrDirectory();
    String index = Files.readString(adr.resolve("README.md"));
    List<Path> records;
    try (Stream<Path> files = Files.list(adr)) {
      records = files.filter(p -> p.getFileName().toString().matches("\\d{4}-.*\\.md")).sorted().toList();
    }
    java.util.regex.Pattern status = java.util.regex.Pattern.compile("(?m)^(Status: \\S|## Status\\s)");
    for (Path r : records) {
      assertThat(status.matcher(Files.readString(r)).find()).as(r.getFileName() + " states its status").isTrue();
      java.util.regex.Matcher row = java.util.regex.Pattern.compile(
          "(?m)^\\| \\[\\d{4}\\]\\(" + java.util.regex.Pattern.quote(r.getFileName().toString())
              + "\\) \\| .+ \\| (accepted|amended|superseded|proposed)[^|]*\\|$").matcher(index);
      assertThat(row.find()).as("the index row of " + r.getFileName() + " with its status").isTrue();
    }
  }

  private static Path adrDirectory() {
    for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
      Path adr = dir.resolve("docs").resolve("adr");
      if (Files.isDirectory(adr)) {
        return adr;
      }
    }
    throw new AssertionError("docs/adr not found above " + Path.of("").toAbsolutePath());
  }
}
