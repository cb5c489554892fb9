//! buffer
