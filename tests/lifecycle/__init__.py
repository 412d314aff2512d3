"""The life-cycle suite. Its helpers assert, so pytest rewrites their asserts as a test module's, to say what differed."""

import pytest

pytest.register_assert_rewrite("tests.lifecycle.registry", "tests.lifecycle.story", "tests.lifecycle.workload")
