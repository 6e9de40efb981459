"""Measuring: the numbers of a table, a sinusoid, a checkpoint, a set of bases or a sweep. The
properties of a proximity (``properties``), the probes (``probes``), exercise 3.1's relative
linearity (``relative_linear``), periods and wavelengths (``periods``), scale (``scale``), a bias's
heads by locality (``bias_locality``), relative vectors by distance (``vector_profile``), and the
reports that put them together (``table``, ``sinusoid``, ``checkpoint``, ``bases``, ``sweep``).

Each returns ``(report, extras)``: a JSON-ready report and the arrays its figures need. It may
import the reading room, never the writing one (``tests/test_analysis_rooms.py``).
"""
