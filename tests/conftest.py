"""Shared fixtures for the whole suite."""

pytest_plugins = ["tests.run_fixture"]
