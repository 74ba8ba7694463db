package dev.sluice.demo;

import java.io.PrintStream;

/**
 * The table of checks a demo prints at its end: a name column, then one value column of 8 characters for each
 * source of values (numbers right-aligned, text as it is).
 */
public final class VerificationTable {
  private final PrintStream out;
  private final int nameWidth;
  private final String line;

  /** Prints a blank line and the table's head: {@code columns} over the value columns, under a rule. */
  public VerificationTable(PrintStream out, int nameWidth, String... columns) {
    this.out = out;
    this.nameWidth = nameWidth;
    this.line = "+" + "-".repeat(nameWidth + 2) + ("+" + "-".repeat(10)).repeat(columns.length) + "+";
    out.println();
    out.println(line);
    row("verification", (Object[]) columns);
    out.println(line);
  }

  /** A row: {@code name}, then one value for each column (a number or a text). */
  public void row(String name, Object... values) {
    StringBuilder format = new StringBuilder("| %-" + nameWidth + "s |");
    for (Object value : values) {
      format.append(value instanceof Number ? " %8d |" : " %8s |");
    }
    Object[] args = new Object[values.length + 1];
    args[0] = name;
    System.arraycopy(values, 0, args, 1, values.length);
    out.printf(format.append("%n").toString(), args);
  }

  /** The rule under the last row. */
  public void end() {
    out.println(line);
  }
}
