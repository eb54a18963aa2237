"""contract tests."""
