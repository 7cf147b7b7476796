"""The test suite, one folder per package of nmtkit that the tests check (tests/<package>/), the
repository-wide checks in tests/project/; shared helpers in tests/helpers.py, fixtures in
tests/conftest.py."""
