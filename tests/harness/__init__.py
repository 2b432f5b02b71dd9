"""Fixtures used by the tests alone (the shared stand-ins are in harness/)."""
