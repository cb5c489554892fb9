//! trybuild tests for the tls macros live in `tests/`.
