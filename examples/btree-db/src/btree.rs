//! btree
