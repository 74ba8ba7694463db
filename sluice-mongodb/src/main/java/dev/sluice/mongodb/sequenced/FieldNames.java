package dev.sluice.mongodb.sequenced;

/**
 * Encodes arbitrary strings as single BSON field names. Members become keys of a sub-document so
 * that one conditional {@code $set} on {@code field.member} can guard them; a '.' would split the
 * path and a leading '$' is an operator, so both are percent-escaped (and '%' itself).
 */
final class FieldNames {
  private FieldNames() {}

  static String encode(String name) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("member must be a non-empty string, but was '" + name + "'");
    }
    StringBuilder sb = null;
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      String esc =
          switch (c) {
            case '%' -> "%25";
            case '.' -> "%2E";
            case '$' -> "%24";
            case '\0' -> throw new IllegalArgumentException("member must not contain NUL: '" + name + "'");
            default -> null;
          };
      if (esc != null && sb == null) {
        sb = new StringBuilder(name.length() + 8).append(name, 0, i);
      }
      if (sb != null) {
        if (esc != null) {
          sb.append(esc);
        } else {
          sb.append(c);
        }
      }
    }
    return sb == null ? name : sb.toString();
  }

  static String decode(String field) {
    if (field.indexOf('%') < 0) {
      return field;
    }
    StringBuilder sb = new StringBuilder(field.length());
    for (int i = 0; i < field.length(); i++) {
      char c = field.charAt(i);
      if (c == '%' && i + 2 < field.length()) {
        sb.append((char) Integer.parseInt(field.substring(i + 1, i + 3), 16));
        i += 2;
      } else {
        sb.append(c);
      }
    }
    return sb.toString();
  }
}
