"""Measuring the blur decision on labelled photos of real people: `manage.py measure_thresholds` (probes.py: the
set's faces and references; verdicts.py: what a decision makes of them; recommend.py: the written rule)."""
