"""memlife tests (a package so that tests.fakes imports)."""
