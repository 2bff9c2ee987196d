//! Unit tests of the NexentaStor simulator.
