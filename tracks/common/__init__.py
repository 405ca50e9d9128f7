"""Run machinery shared by the vision and language tracks."""
