//! Unit tests of the SolidFire simulator.
