package dev.sluice.app.cli;

/**
 * A subcommand of {@code sluice} that lives in another module: a picocli {@code @Command} class with
 * a public no-argument constructor, named in that module's
 * {@code META-INF/services/dev.sluice.app.cli.CommandPlugin}. {@link dev.sluice.app.Main} adds every
 * one it finds on the class path, after its own commands, and runs it with the same error lines and
 * exit codes.
 *
 * <p>The demo ({@code sluice-demo}, {@code dev.sluice.demo.DemoCommand}) is the one there is: it runs
 * on the test kit's embedded servers, which the service must not depend on. {@code bin/sluice} runs
 * the command line on the demo module's class path, so {@code bin/sluice demo} works in a checkout,
 * while the distribution archive, built from {@code sluice-app} alone, has no demo (ADR 0115).
 */
public interface CommandPlugin {
}
