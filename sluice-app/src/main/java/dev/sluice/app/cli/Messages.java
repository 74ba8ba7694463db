package dev.sluice.app.cli;

/** Error text for people: one line, causes included, passwords masked. */
public final class Messages {
  private Messages() {}

  /** The message of {@code e} and its causes on one line, without stack traces, passwords masked. */
  public static String oneLine(Throwable e) {
    StringBuilder out = new StringBuilder();
    for (Throwable t = e; t != null && out.length() < 400; t = t.getCause() == t ? null : t.getCause()) {
      if (out.length() > 0) {
        out.append(" <- ");
      }
      out.append(t.getClass().getSimpleName()).append(": ").append(String.valueOf(t.getMessage()).replace('\n', ' '));
    }
    String line = Secrets.mask(out.toString());
    return line.length() > 400 ? line.substring(0, 400) + "..." : line;
  }
}
