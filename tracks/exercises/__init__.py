"""The course's self-test made runnable: exercises a student solves, and a grader for one file or a class.

`python -m tracks exercises` lists them and writes one's file into a folder;
`python -m tracks check FILE...` grades files and `python -m tracks grade DIR
--out OUT` a whole class into a gradebook (tracks/exercises/cli.py).

One module per exercise (ex1_residual_layer.py ... ex6_paths.py: the
question and the file a student starts from, the inputs a run draws, the
references and the judges), found through catalogue.py. Every file runs in
its own process under a supervisor of its own (sandbox.py is the grader's
side; harness/ is the file's side: the supervisor, the runner, the
confinement and the probes, which call the student's code and hold no
expected value) and sends back what the student's code computed; the
verdicts are made in the grader's process (exercise.py, grading.py), from
values it computes itself, and gradebook.py writes them down. A confined
file cannot read this package. The instructors' solutions live outside the
package, in the repository's `solutions/` folder. docs/grading.md is the
instructor's page.
"""
