"""The course's self-test made runnable: exercises a student solves and the package grades.

`python -m tracks exercises` lists them and copies one's file into a folder;
`python -m tracks check FILE...` grades solutions with the package's own
instruments (tracks/exercises/checks.py). Instructors' solutions live
outside the package, in the repository's `solutions/` folder.
"""
