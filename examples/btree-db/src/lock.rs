//! lock
