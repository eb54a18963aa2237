"""Fakes of external services for tests (see messages_api for the Messages API)."""
