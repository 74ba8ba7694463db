package dev.sluice.app.demo.views;

import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code sluice demo-enrolment}: sequenced updates from shuffled, duplicated broker messages. */
@Command(name = "demo-enrolment", mixinStandardHelpOptions = true,
    description = "Enrol/unenrol messages with sequence numbers go through an embedded AMQP broker shuffled "
        + "and duplicated; five consumers apply them at once without a lock. Ends by comparing with "
        + "applying them in sequence order.")
public final class EnrolmentDemoCommand implements Callable<Integer> {

  @Option(names = "--messages", defaultValue = "2000", description = "distinct messages (default ${DEFAULT-VALUE})")
  int messages;

  @Option(names = "--students", defaultValue = "50", description = "students (default ${DEFAULT-VALUE})")
  int students;

  @Option(names = "--duplicates", defaultValue = "20", description = "duplicates in percent (default ${DEFAULT-VALUE})")
  int duplicates;

  @Override
  public Integer call() throws Exception {
    if (messages < 1 || students < 1 || duplicates < 0 || duplicates > 100) {
      throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
          "need --messages >= 1, --students >= 1, 0 <= --duplicates <= 100");
    }
    return new EnrolmentDemo(new EnrolmentDemo.Settings(messages, students, duplicates), System.out).run().ok()
        ? 0 : 1;
  }
}
