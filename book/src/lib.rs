//! The tutorial book: each chapter is included as a doc test.
