//! The shared driver conformance suite.
