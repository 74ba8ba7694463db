package dev.sluice.mongodb.errors;

/**
 * The rows of {@code docs/mongodb-errors.md} about the stores and the handler's writes (lease,
 * dead letters, views, fenced writes, the inbox), run by {@link ErrorCatalogueTest}'s scenarios in
 * a test class of their own, so that the module's second test JVM takes them.
 */
class ErrorCatalogueStoresTest extends ErrorCatalogueTest {
  @Override
  boolean runsHere(Row row) {
    return STORE_SURFACES.contains(row.surface());
  }
}
