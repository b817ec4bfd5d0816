"""The scorecard: every strategy against the field's named hard cases (``lblab scorecard``)."""
