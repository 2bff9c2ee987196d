//! The solidfire-san driver: the Element plumbing against canned answers, and (with the
//! simulator) the conformance suite.

mod canned;
