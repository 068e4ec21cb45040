"""The instructor's half of the course: grading, the deciding figures, verdicts and rubric, and the release that leaves
this folder out (nmtkit/course/__init__.py lists its modules)."""
