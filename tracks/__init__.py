"""The two command-line tracks (vision, language) and their shared run machinery."""
