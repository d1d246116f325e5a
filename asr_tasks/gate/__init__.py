"""The quality gate: Great Expectations suites over each transcript's segments and figures, and the day's
quality report."""
