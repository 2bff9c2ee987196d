//! Unit tests of the solidfire-san driver: config, names, error classes.
