"""The chaos run (bench/chaos.py; reduced, tests/test_chaos.py): real PostgreSQL, SeaweedFS and workers drain
a hostile queue while faults are injected, then fifteen invariants are checked.

run.py runs it; services.py and workers.py start what it needs; seed.py (with uploads.py, scenes.py and
edge_cuts.py) fills the queue; faults.py and sweeps.py inject the faults; monitors.py watches while it runs;
invariants.py (with the *_checks.py modules) checks the end; report.py prints the table and writes the JSON.
"""
