"""The course's self-test made runnable: exercises a student solves, and a grader for one file or a class.

`python -m tracks exercises` lists them and writes one's file into a folder;
`python -m tracks check FILE...` grades files and `python -m tracks grade DIR
--out OUT` a whole class into a gradebook (tracks/exercises/grader.py).

One module per exercise (ex1_residual_layer.py ... ex6_paths.py: the
question and the file a student starts from, the inputs a run draws, the
checks and their references), found through catalogue.py. Every file runs in
its own process (sandbox.py starts it, runner.py is its side) and sends back
what the student's code computed; the verdicts are made in the grader's
process (exercise.py, grading.py), and gradebook.py writes them down. The
instructors' solutions live outside the package, in the repository's
`solutions/` folder. docs/grading.md is the instructor's page.
"""
