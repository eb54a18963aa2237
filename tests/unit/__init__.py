"""unit tests."""
