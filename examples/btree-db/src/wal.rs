//! wal
