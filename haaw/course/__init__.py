"""The course around the engine: each notebook's props (``nb01`` ... ``nb10``: data, small studies,
plots' inputs), its exercises (``haaw.course.exercises``), the interactive explorers and the plots.
Notebooks call them by module (``nb06.measure(...)``), so a learner can tell a course prop from the
engine at a glance."""
