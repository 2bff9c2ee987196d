//! E-Series (SANtricity Web Services): the eseries-iscsi driver against canned proxy answers
//! (`canned`).

mod canned;
