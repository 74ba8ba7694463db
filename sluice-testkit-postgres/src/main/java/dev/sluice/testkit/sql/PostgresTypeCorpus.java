package dev.sluice.testkit.sql;

import java.util.ArrayList;
import java.util.List;

/**
 * Issue 33's PostgreSQL type corpus: a table per group of types, and edge values of each type as
 * SQL literals, one case per value (an {@code INSERT} of that column alone, the other columns
 * null). {@code PostgresTypeCorpusTest} (sluice-postgres) writes them and compares Sluice's changes
 * with the server's {@code to_jsonb}; {@code DebeziumTypeCorpus} (sluice-benchmarks-debezium)
 * writes the same cases and records what Debezium's PostgreSQL connector gives. Data only: how a
 * column is compared is the reader's business.
 */
public final class PostgresTypeCorpus {
  private PostgresTypeCorpus() {}

  /** A column of a corpus table: its name (unique across the corpus) and its SQL type. */
  public record Column(String name, String type) {}

  /** One value: {@code INSERT INTO table (id, column) VALUES (id, literal)}. */
  public record Case(String column, String literal) {}

  /** A table ({@code id int PRIMARY KEY} and the columns) and its cases. */
  public record Group(String table, List<Column> columns, List<Case> cases) {
    /** {@code CREATE TABLE table (id int PRIMARY KEY, column type, ...)}. */
    public String createTable() {
      StringBuilder ddl = new StringBuilder("CREATE TABLE " + table + " (id int PRIMARY KEY");
      columns.forEach(c -> ddl.append(", ").append(c.name()).append(' ').append(c.type()));
      return ddl.append(')').toString();
    }

    /** The column named {@code name}. */
    public Column column(String name) {
      return columns.stream().filter(c -> c.name().equals(name)).findFirst().orElseThrow(
          () -> new IllegalArgumentException("no column " + name + " in " + table));
    }
  }

  private static Group group(String table, List<Column> columns, String... cases) {
    List<Case> out = new ArrayList<>();
    for (String c : cases) {
      int eq = c.indexOf('=');
      out.add(new Case(c.substring(0, eq), c.substring(eq + 1)));
    }
    return new Group(table, columns, out);
  }

  private static Column col(String name, String type) {
    return new Column(name, type);
  }

  /** The types the corpus tables use, created first. */
  public static final List<String> TYPES = List.of(
      "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
      "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
      "CREATE TYPE pair AS (n int, s text)");

  public static final List<Group> GROUPS = List.of(
      group("c_int", List.of(col("i2", "smallint"), col("i4", "integer"),
              col("i8", "bigint"), col("b", "boolean")),
          "i2=-32768", "i2=32767", "i4=-2147483648", "i4=2147483647", "i8=-9223372036854775808",
          "i8=9223372036854775807", "b=true", "b=false"),
      group("c_numeric", List.of(col("n", "numeric"), col("ns", "numeric(12,4)")),
          "n=1234567890123456789012345678901234567890", "n=-0.0000000000000000000000000000000000000001",
          "n='NaN'", "n='Infinity'", "n='-Infinity'", "ns=1.5000", "ns=-0.0001"),
      group("c_float", List.of(col("f4", "real"), col("f8", "double precision")),
          "f4='NaN'", "f4='Infinity'", "f4='-Infinity'", "f4='-0'", "f4=3.4028235e38", "f4=0.1",
          "f8='NaN'", "f8='Infinity'", "f8='-Infinity'", "f8='-0'", "f8=1.7976931348623157e308",
          "f8=4.9e-324", "f8=0.1"),
      group("c_text", List.of(col("t", "text"), col("c", "char(5)"),
              col("vc", "varchar(20)")),
          "t='emoji \uD83D\uDE00 and \u2028 line separator'", "t='quote '' \" \\ backslash, comma {}'",
          "t=''", "c='ab'", "vc='x\ny'"),
      group("c_bytea", List.of(col("by", "bytea")),
          "by='\\x00ff10'", "by='\\x'", "by='\\x5c2722e282ac'"),
      group("c_date", List.of(col("d", "date")),
          "d='infinity'", "d='-infinity'", "d='0044-03-15 BC'", "d='10000-01-01'", "d='2026-02-28'",
          "d='0001-01-01'"),
      group("c_time", List.of(col("tm", "time"), col("ttz", "timetz")),
          "tm='24:00:00'", "tm='00:00:00'", "tm='23:59:59.999999'", "ttz='12:34:56.789+05:30'",
          "ttz='24:00:00-15:59'"),
      group("c_stamp", List.of(col("ts", "timestamp"), col("tz", "timestamptz")),
          "ts='infinity'", "ts='-infinity'", "ts='2026-11-25 10:15:30.123456'", "ts='2026-11-25 10:15:00'",
          "ts='0044-03-15 12:00:00 BC'", "ts='10000-01-01 00:00:00'", "ts='1900-01-01 00:00:00'",
          "tz='infinity'", "tz='-infinity'", "tz='2026-11-25 10:15:30.123456+02'", "tz='1900-01-01 00:00:00+00'",
          "tz='1800-06-01 12:00:00+00'", "tz='0044-03-15 12:00:00+00 BC'", "tz='10000-01-01 00:00:00+00'"),
      group("c_interval", List.of(col("iv", "interval")),
          "iv='1 year 2 months 3 days 04:05:06.789'", "iv='-1 mons +2 days -03:00:00'", "iv='0'",
          "iv='-178000000 years'"),
      group("c_misc", List.of(col("u", "uuid"), col("j", "json"), col("jb", "jsonb")),
          "u='a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "j='{\"a\": 1, \"a\": 2, \"b\": [1, 2.50]}'",
          "jb='{\"big\": 9007199254740993, \"neg\": -9223372036854775809, \"f\": 1.10, \"s\": \"\\u2028\"}'",
          "jb='[]'", "jb='\"just a string\"'"),
      group("c_array", List.of(col("ai", "int[]"), col("at", "text[]"),
              col("a2", "int[][]"), col("an", "numeric[]"), col("au", "uuid[]"),
              col("ab", "boolean[]"), col("af", "double precision[]"),
              col("aj", "jsonb[]"), col("a3", "text[][][]")),
          "ai='{1,NULL,3}'", "ai='{}'", "at=ARRAY['a,b', 'c\"d', NULL, 'NULL', '', 'x y', 'back\\slash', '{}']",
          "a2='{{1,2},{3,NULL}}'", "an='{1.50,NaN}'", "au='{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}'",
          "ab='{t,f,NULL}'", "af='{NaN,Infinity,-Infinity,0.1}'",
          "aj=ARRAY['{\"a\": [1, 9007199254740993]}'::jsonb, NULL, '\"s\"'::jsonb]",
          "a3=ARRAY[[['a', 'b,c'], ['{', NULL]], [['}', '\"'], ['', 'NULL']]]"),
      group("c_user", List.of(col("e", "mood"), col("dm", "posint"),
              col("cp", "pair"), col("r", "int4range"), col("dr", "daterange")),
          "e='happy'", "dm=5", "cp=ROW(1, 'x, \"y\"')", "r='[1,10)'", "r='empty'", "dr='[2026-01-01,infinity)'"),
      group("c_net", List.of(col("ip", "inet"), col("cn", "cidr"), col("mac", "macaddr")),
          "ip='192.168.0.1/24'", "ip='::1'", "cn='10.0.0.0/8'", "mac='08:00:2b:01:02:03'"),
      group("c_other", List.of(col("m", "money"), col("bt", "bit(4)"),
              col("vb", "varbit"), col("x", "xml"), col("tv", "tsvector")),
          "m='-12.34'", "bt=B'1010'", "vb=B'101'", "x='<a b=\"1\">t &amp; u</a>'", "tv='a fat:2 cat'"));
}
