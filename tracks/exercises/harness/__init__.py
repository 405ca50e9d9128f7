"""The submission's side of grading: what runs in a submission's process, beside the student's code.

The grader copies this folder into each run's scratch folder, and the
submission's process imports it from there as `harness` (so its modules
import each other relatively): supervisor.py (the per-file subreaper, which
forks the submission's process), runner.py (imports the file, runs the
probes), landlock.py (the confinement), values.py (what is sent back) and
one module of probes per exercise (ex1.py ... ex6.py: how to call the
student's code on the grader's inputs and weights). None of it holds an
expected value or decides a verdict: the references and judges stay in
tracks/exercises/, which a confined submission cannot read.
"""
