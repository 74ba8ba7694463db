package dev.sluice.app.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.app.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

class SecretsTest {

  @Test
  void passwordsOfConnectionStringsAreMaskedWhereverTheyAppear() {
    assertThat(Secrets.mask("mongodb://app:s3cret@db1:27017,db2/shop?replicaSet=rs0"))
        .isEqualTo("mongodb://app:****@db1:27017,db2/shop?replicaSet=rs0");
    assertThat(Secrets.mask("cannot connect to amqp://guest:gu%40est@broker:5672/%2F: refused"))
        .isEqualTo("cannot connect to amqp://guest:****@broker:5672/%2F: refused");
    assertThat(Secrets.mask("mongodb+srv://u:p@cluster0.example.net/?authSource=admin"))
        .isEqualTo("mongodb+srv://u:****@cluster0.example.net/?authSource=admin");
    assertThat(Secrets.mask("jdbc:postgresql://db/app?user=app&password=s3cret&ssl=true"))
        .isEqualTo("jdbc:postgresql://db/app?user=app&password=****&ssl=true");
    assertThat(Secrets.mask("mongodb://db1:27017/shop")).as("no credentials: unchanged").isEqualTo("mongodb://db1:27017/shop");
    assertThat(Secrets.mask("mongodb://app@db1/")).as("a user without password").isEqualTo("mongodb://app@db1/");
  }

  @Test
  void verboseAddsTheStackTraceMasked() {
    StringWriter err = new StringWriter();
    int code = Main.commandLine().setErr(new PrintWriter(err)).execute("status", "--verbose", "--mongo",
        "mongodb://app:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=300", "--database", "shop");
    assertThat(code).isEqualTo(Main.EXIT_UNREACHABLE);
    assertThat(err.toString()).contains("\tat ").doesNotContain("s3cret");
  }
}
