//! Unit tests of the E-Series simulator.
