package dev.sluice.postgres.feed;

/** A column value that cannot be converted, naming the column, its type and its text. */
final class Unconvertible extends RuntimeException {
  private static final long serialVersionUID = 1L;
  final String column;
  final String type;
  final String text;

  Unconvertible(String column, String type, String text, RuntimeException cause) {
    super("column " + column + " (" + type + "): " + cause.getMessage(), cause);
    this.column = column;
    this.type = type;
    this.text = text.length() <= 1000 ? "'" + text + "'"
        : "'" + text.substring(0, 1000) + "'... (" + text.length() + " characters)";
  }

  /** What cannot be converted, where: for the reason of an undecodable change. */
  String describe(String table) {
    return "of " + table + ": column " + column + " of type " + type + " holds a value that cannot be converted ("
        + getCause() + "): " + text;
  }
}
